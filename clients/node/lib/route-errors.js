'use strict';
// How the Express middleware learns that a handler after it threw, rejected or called
// next(err) before answering: Express passes each handler its router's own `next`, which no
// middleware can wrap. So a request through `idempotency()` finds where the middleware is
// mounted — in the app's router (`app._router` in Express 4, `app.router` in 5), in a
// nested express.Router(), in a route, or with app.use — and wraps every handler that can
// run after it (`layer.handle`, in Express 4 and 5 alike): the layers after it in its stack,
// everything inside the routes and routers among them (recursively), and the layers after
// the enclosing layer in each stack above. The walk is done again only when a stack in the
// app has grown since (a route or a router added after the first request).
//
// While a request is held (`req[WATCHING]` set), a wrapped handler's throw, rejected
// promise or next(err) calls `req[WATCHING](error)` first, and goes on to Express's error
// handlers with next(error) once that has given the key back (so a client answered 500
// finds the key free). Error handlers after the middleware are wrapped too: an error that
// reaches one from elsewhere (a router.param callback, a path that does not decode) gives
// the key back before the error handler answers. Requests that are not held pass straight
// through. A sub-app (an `express()` mounted with app.use) is one handler to its parent:
// its errors are seen when it passes them on.

/** The property of a held request: the function to call with the handler's error. */
const WATCHING = Symbol('claimd.express.watching');
/** Marks a layer whose handler is wrapped. */
const WRAPPED = Symbol('claimd.express.wrapped');
/** Marks an idempotency() middleware: never wrapped, since it holds requests itself. */
const GUARD = Symbol('claimd.express.guard');
/** Per stack searched from, per middleware: the stacks walked and their lengths then. */
const walks = new WeakMap();

/** Calls `handle` as Express would: a throw or a rejected promise goes to `next`. */
function invoke(handle, self, args, next) {
  let ret;
  try {
    ret = handle.apply(self, args);
  } catch (error) {
    return next(error);
  }
  if (ret && typeof ret.then === 'function') {
    ret.then(undefined, (error) => next(error || new Error('Rejected promise')));
  }
  return undefined;
}

/** `handle` (a request handler), reporting its errors to a held request. */
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

/** `handle` (an error handler): for a held request, it runs once the key is given back. */
function watchErrors(handle) {
  return function watchedErrorHandler(error, req, res, next) {
    const fail = req[WATCHING];
    const handedBack = typeof fail === 'function' && error ? fail(error) : null;
    if (!handedBack) return handle.call(this, error, req, res, next);
    handedBack.then(() => invoke(handle, this, [error, req, res, next], next));
    return undefined;
  };
}

/** The stack inside a layer: its Route's, or its nested express.Router()'s; else null. */
function innerStack(layer) {
  if (layer.route && Array.isArray(layer.route.stack)) return layer.route.stack;
  const handle = layer.handle;
  return typeof handle === 'function' && Array.isArray(handle.stack) ? handle.stack : null;
}

/** Wraps `layer`'s handler, or every handler in the stack inside it. */
function watchLayer(layer, walked) {
  const inner = innerStack(layer);
  if (inner) return watchStack(inner, walked, null);
  const handle = layer.handle;
  if (layer[WRAPPED] || typeof handle !== 'function' || handle[GUARD] || handle.length > 4) return false;
  layer.handle = handle.length === 4 ? watchErrors(handle) : watch(handle);
  layer[WRAPPED] = true;
  return false;
}

/**
 * Walks `stack` (recording it in `walked`): with `middleware`, finds it (in the stack or
 * below) and wraps every handler after it, returning whether it was found; with null,
 * wraps every handler.
 */
function watchStack(stack, walked, middleware) {
  if (walked.has(stack)) return false; // a router mounted inside itself
  walked.set(stack, stack.length);
  let found = middleware === null;
  for (const layer of stack) {
    if (!layer) continue;
    if (found) watchLayer(layer, walked);
    else if (layer.handle === middleware) found = true;
    else {
      const inner = innerStack(layer);
      if (inner && watchStack(inner, walked, middleware)) found = true;
    }
  }
  return found && middleware !== null;
}

/** Whether a past walk from `root` still holds: no stack it walked has changed length. */
function unchanged(walk) {
  for (const [stack, length] of walk.walked) if (stack.length !== length) return false;
  return true;
}

/** Finds `middleware` below `root` and wraps the handlers after it, once per change. */
function watchFrom(root, middleware) {
  let byMiddleware = walks.get(root);
  if (!byMiddleware) walks.set(root, (byMiddleware = new WeakMap()));
  const past = byMiddleware.get(middleware);
  if (past && unchanged(past)) return past.found;
  const walked = new Map();
  const found = watchStack(root, walked, middleware);
  byMiddleware.set(middleware, { found, walked });
  return found;
}

/** The stack of the app's router (Express 4: `app._router`; 5: `app.router`), or null. */
function appStack(app) {
  if (!app) return null;
  let router = app._router;
  if (!router) {
    try {
      router = app.router; // a getter; Express 4's throws ("deprecated")
    } catch {
      router = null;
    }
  }
  return router && Array.isArray(router.stack) ? router.stack : null;
}

/**
 * Wraps the handlers that can run after `middleware` for `req`: found from the app's router
 * (`req.app`), else from the request's route; false when it is in neither (called by hand
 * from another function, say), so the handlers' errors cannot be seen.
 */
function watchHandlers(req, middleware) {
  const root = appStack(req.app);
  if (root && watchFrom(root, middleware)) return true;
  const route = req.route;
  return Boolean(route && Array.isArray(route.stack) && watchFrom(route.stack, middleware));
}

/** Marks `middleware` as an idempotency() middleware. */
function markGuard(middleware) {
  Object.defineProperty(middleware, GUARD, { value: true });
  return middleware;
}

module.exports = { watchHandlers, markGuard, WATCHING };
