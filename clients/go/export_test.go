package claimd

// TokenOf exposes a lease's claim token to the tests, which check it never prints.
func TokenOf(l *Lease) string { return l.token }
