package claimd

// TokenOf exposes a lease's claim token to the tests, which check it never prints.
func TokenOf(l *Lease) string { return l.token }

// HeartbeatDone exposes the channel closed when a lease's heartbeat goroutine ends (nil
// when none runs), so tests can tell it stopped.
func HeartbeatDone(l *Lease) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.beating
}

// WrapError exposes how an RPC error becomes an *Error or a *QuotaError.
func WrapError(op string, err error) error { return wrapError(op, err) }
