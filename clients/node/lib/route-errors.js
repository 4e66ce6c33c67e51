'use strict';
// How the Express middleware learns that the handler after it threw or called next(err)
// before answering: Express passes the handler the route's own `next`, which no
// middleware can wrap. So the first request through `idempotency()` on a route wraps the
// handlers after it in that route (once; `layer.handle`, in Express 4 and 5 alike): while
// a request is held (`req[WATCHING]` set), a throw, a rejected promise or next(err) calls
// `req[WATCHING](error)` first, and goes on to Express's error handlers with next(error)
// once that has given the key back (so a client answered 500 finds the key free). Requests
// that are not held pass straight through.

/** The property of a held request: the function to call with the handler's error. */
const WATCHING = Symbol('claimd.express.watching');
/** Marks a layer whose handler is wrapped. */
const WRAPPED = Symbol('claimd.express.wrapped');
/** Routes already wrapped after a given middleware. */
const watched = new WeakMap();

/** `handle`, reporting its errors to a held request. */
function watch(handle) {
  const wrapped = function watchedHandler(req, res, next) {
    const fail = req[WATCHING];
    if (typeof fail !== 'function') return handle.call(this, req, res, next);
    // The error goes on once the key is given back; null: the response came first.
    const later = (error) => {
      const handedBack = fail(error);
      if (!handedBack) return false;
      handedBack.then(() => next(error));
      return true;
    };
    const spy = function spyNext(error) {
      if (error && error !== 'route' && error !== 'router' && later(error)) return undefined;
      return next.apply(this, arguments); // eslint-disable-line prefer-rest-params
    };
    let ret;
    try {
      ret = handle.call(this, req, res, spy);
    } catch (error) {
      if (later(error)) return undefined;
      throw error;
    }
    if (ret && typeof ret.then === 'function') {
      return ret.then(undefined, (error) => {
        if (!later(error || new Error('Rejected promise'))) throw error;
      });
    }
    return ret;
  };
  // Express tells handlers (3 arguments) from error handlers (4) by their length.
  Object.defineProperty(wrapped, 'length', { value: handle.length });
  return wrapped;
}

/**
 * Wraps the handlers after `middleware` in `route` (an Express Route, `req.route`);
 * false when `middleware` is not in it (mounted with app.use, say).
 */
function watchRoute(route, middleware) {
  if (!route || !Array.isArray(route.stack)) return false;
  let done = watched.get(route);
  if (done && done.has(middleware)) return true;
  const at = route.stack.findIndex((layer) => layer && layer.handle === middleware);
  if (at < 0) return false;
  for (const layer of route.stack.slice(at + 1)) {
    if (layer[WRAPPED] || typeof layer.handle !== 'function' || layer.handle.length > 3) continue;
    layer.handle = watch(layer.handle);
    layer[WRAPPED] = true;
  }
  if (!done) watched.set(route, (done = new WeakSet()));
  done.add(middleware);
  return true;
}

module.exports = { watchRoute, WATCHING };
