// Package testenv is the test suites' access to the claimd servers the repository's
// harness starts (`cargo test --test it polyglot::clients_go`): their addresses come from
// the environment, and a missing one fails the test, naming who sets it — never a skip.
package testenv

import (
	"os"
	"testing"

	"claimd.dev/go/claimd"
)

// Harness names what sets the environment the tests need.
const Harness = "set by `cargo test --test it polyglot::clients_go`, which starts claimd"

// Env returns an environment variable, failing the test when it is missing.
func Env(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: it is %s", name, Harness)
	}
	return v
}

// Dial returns a client of addr, closed at the end of the test.
func Dial(t *testing.T, addr string, opts ...claimd.Option) *claimd.Client {
	t.Helper()
	c, err := claimd.New(addr, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// OnBothStores runs f, in parallel subtests `embedded` and `postgres`, with a client of the
// embedded store's claimd and one of the PostgreSQL claimd.
func OnBothStores(t *testing.T, f func(t *testing.T, c *claimd.Client)) {
	for _, store := range []struct{ name, env string }{
		{"embedded", "CLAIMD_EMBEDDED_ADDR"},
		{"postgres", "CLAIMD_POSTGRES_ADDR"},
	} {
		t.Run(store.name, func(t *testing.T) {
			t.Parallel()
			f(t, Dial(t, Env(t, store.env)))
		})
	}
}
