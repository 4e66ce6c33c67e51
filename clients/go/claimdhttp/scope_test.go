package claimdhttp

// The default scope's unit tests: the spec's three worked examples, verbatim (the Node,
// Python and Java packages hold the same), and how Authorization and Cookie lines are read.

import (
	"net/http"
	"testing"
)

// request is a request with these header lines (name, value, name, value, …), in order.
func request(lines ...string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "http://app.test/orders", nil)
	for i := 0; i < len(lines); i += 2 {
		r.Header.Add(lines[i], lines[i+1])
	}
	return r
}

func TestWithoutAClientFunctionTheClientIsTheAuthorizationDigestElseTheSessionCookieDigestElseAnonymous(t *testing.T) {
	for _, v := range []struct {
		name, cookie, client, claim string
		r                           *http.Request
	}{
		{
			"Authorization", "",
			"auth:554b8cec38a5a3f3b9baf98b21f33155c74c0520c6e4db8bd91ac366fa3775ed",
			"auth%3A554b8cec38a5a3f3b9baf98b21f33155c74c0520c6e4db8bd91ac366fa3775ed order-1",
			request("Authorization", "Bearer token-A"),
		},
		{
			"session cookie", "sid",
			"cookie:b55bfccadad2d5e3cd608c839d764d9b794fed8effba825a3fdbade6fd7de562",
			"cookie%3Ab55bfccadad2d5e3cd608c839d764d9b794fed8effba825a3fdbade6fd7de562 order-1",
			request("Cookie", "a=1; sid=s%3Aabc.def; b=2"),
		},
		{"neither", "", "anonymous", "anonymous order-1", request()},
	} {
		client := DefaultClient(v.r, v.cookie)
		if client != v.client || ClaimKey(client, "order-1") != v.claim {
			t.Errorf("%s: client %q, claim key %q; want %q, %q", v.name, client, ClaimKey(client, "order-1"), v.client, v.claim)
		}
	}
}

func TestAuthorizationLinesAreJoinedInOrderAndComeBeforeTheSessionCookie(t *testing.T) {
	joined := DefaultClient(request("Authorization", "Bearer token-A"), "sid")
	two := DefaultClient(request("Authorization", "Bearer", "Authorization", "token-A", "Cookie", "sid=x"), "sid")
	if want := "auth:" + sha256Hex("Bearer, token-A"); two != want || two == joined {
		t.Fatalf("two Authorization lines: %q, want %q", two, want)
	}
	swapped := DefaultClient(request("Authorization", "token-A", "Authorization", "Bearer"), "")
	if swapped == two {
		t.Fatal("the order of the Authorization lines does not count")
	}
	if got := DefaultClient(request("Authorization", "", "Cookie", "sid=x"), "sid"); got != "auth:"+sha256Hex("") {
		t.Fatalf("an empty Authorization line is still one: %q", got)
	}
}

func TestTheSessionCookieIsItsFirstValueAsSentOnAnyCookieLine(t *testing.T) {
	for _, c := range []struct {
		name, want string
		r          *http.Request
	}{
		{"first occurrence", "one", request("Cookie", "sid=one; sid=two")},
		{"second Cookie line", "s%3Ax=y", request("Cookie", "a=1", "Cookie", " sid=s%3Ax=y ;b")},
		{"quoted, not unquoted", `"q"`, request("Cookie", `sid="q"`)},
		{"empty value", "", request("Cookie", "sid=")},
	} {
		if got := DefaultClient(c.r, "sid"); got != "cookie:"+sha256Hex(c.want) {
			t.Errorf("%s: %q, want the digest of %q", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		cookie, session string
	}{
		{"SID=one; xsid=two; sid", "sid"}, // names are case-sensitive and whole
		{"sid=one", ""},                   // no session cookie named
	} {
		if got := DefaultClient(request("Cookie", c.cookie), c.session); got != Anonymous {
			t.Errorf("Cookie %q, session cookie %q: %q, want anonymous", c.cookie, c.session, got)
		}
	}
}
