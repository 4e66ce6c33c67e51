package claimdhttp

// The default scope of a key: whose key space a request's Idempotency-Key is in when the
// app gives no WithClientOf. It is the Node, Python and Java packages' default, byte for
// byte, so that the packages share receipts.

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// Anonymous is the client of a request that carries no credentials the default scope
// knows: all such requests share one key space.
const Anonymous = "anonymous"

// DefaultClient is the client of a request when no WithClientOf is given:
//   - "auth:" and the lowercase hex SHA-256 of its Authorization header lines' values
//     (joined with ", ", in order) when it has any;
//   - else, when sessionCookie is not empty and the request's Cookie headers carry that
//     cookie, "cookie:" and the SHA-256 of its first value exactly as sent (not decoded);
//   - else Anonymous.
//
// Two credentials never share a key space. A bearer token that rotates changes the scope
// (a retry after a refresh runs again), and the digest is part of the key claimd stores,
// so a weak secret (a Basic password) could be guessed from it offline: apps with sign-in
// sessions or Basic auth pass WithClientOf returning the authenticated user's id. Such a
// function may fall back on DefaultClient for requests it does not know.
func DefaultClient(r *http.Request, sessionCookie string) string {
	if auth := r.Header.Values("Authorization"); len(auth) > 0 {
		return "auth:" + sha256Hex(strings.Join(auth, ", "))
	}
	if sessionCookie != "" {
		if value, ok := cookieValue(r.Header.Values("Cookie"), sessionCookie); ok {
			return "cookie:" + sha256Hex(value)
		}
	}
	return Anonymous
}

// cookieValue is the value of the first cookie named name in the Cookie header lines: each
// line split on ";", each pair trimmed of spaces and tabs, the value what follows its first
// "=" (as sent: no unquoting, no URL-decoding, unlike http.Request.Cookie).
func cookieValue(lines []string, name string) (string, bool) {
	for _, line := range lines {
		for pair := range strings.SplitSeq(line, ";") {
			n, v, ok := strings.Cut(strings.Trim(pair, " \t"), "=")
			if ok && n == name {
				return v, true
			}
		}
	}
	return "", false
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// validCookieName reports whether name is an RFC 6265 cookie name (an RFC 7230 token).
func validCookieName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
