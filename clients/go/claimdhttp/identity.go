package claimdhttp

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// MaxKeyChars is the longest Idempotency-Key value accepted, after unquoting.
const MaxKeyChars = 255

// maxClaimKeyBytes is claimd's limit for a key; a longer claim key is hashed.
const maxClaimKeyBytes = 512

// keyRule is the detail of a 400 for a malformed key: the rule, never the value.
const keyRule = "Idempotency-Key must be 1–255 printable ASCII characters, or a quoted string of them"

func printable(c byte) bool { return c >= 0x20 && c <= 0x7e }

// ParseKey returns the value of an Idempotency-Key header: the draft's sf-string ("…" with
// \" and \\ escapes) or a bare value of printable ASCII (no space first or last); ok is
// false when it is neither, or not 1 to 255 characters once unquoted.
func ParseKey(header string) (key string, ok bool) {
	var b strings.Builder
	if strings.HasPrefix(header, `"`) {
		i := 1
		for ; i < len(header); i++ {
			c := header[i]
			if c == '"' {
				break
			}
			if !printable(c) {
				return "", false
			}
			if c == '\\' {
				i++
				if i >= len(header) || (header[i] != '"' && header[i] != '\\') {
					return "", false
				}
			}
			b.WriteByte(header[i])
		}
		if i != len(header)-1 {
			return "", false // unterminated, or something after the string
		}
	} else {
		for i := 0; i < len(header); i++ {
			if !printable(header[i]) {
				return "", false
			}
		}
		if strings.HasPrefix(header, " ") || strings.HasSuffix(header, " ") {
			return "", false
		}
		b.WriteString(header)
	}
	key = b.String()
	return key, len(key) >= 1 && len(key) <= MaxKeyChars
}

// ClaimKey returns the claimd key of a request: `<client or '-'> <key>` with the client
// percent-encoded as JavaScript's encodeURIComponent does, or `sha256:<hex>` of it when
// it is longer than claimd allows. Method and path are not part of it: they are in the
// fingerprint, so the same key on another route is a conflict.
func ClaimKey(client, key string) string {
	if client == "" {
		client = "-"
	}
	claim := encodeURIComponent(client) + " " + key
	if len(claim) <= maxClaimKeyBytes {
		return claim
	}
	sum := sha256.Sum256([]byte(claim))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// encodeURIComponent escapes everything but A-Z a-z 0-9 - _ . ! ~ * ' ( ) as UTF-8
// percent-escapes (invalid UTF-8 becomes U+FFFD first).
func encodeURIComponent(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
			strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	return b.String()
}

// IsJSONType reports whether a Content-Type is JSON: application/json or */*+json, with
// any parameters.
func IsJSONType(contentType string) bool {
	t := strings.ToLower(strings.TrimSpace(strings.SplitN(contentType, ";", 2)[0]))
	if t == "application/json" {
		return true
	}
	typ, sub, ok := strings.Cut(t, "/")
	if !ok || !tokenChars(typ) || !strings.HasSuffix(sub, "+json") {
		return false
	}
	return tokenChars(strings.TrimSuffix(sub, "+json"))
}

func tokenChars(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("!#$&^_.+-", c) >= 0) {
			return false
		}
	}
	return true
}

// Fingerprint returns the fingerprint of a request: SHA-256 of `METHOD\n`, the path with
// its query, `\n`, and the body: its canonical JSON (see CanonicalJSON) when contentType
// is JSON, the body is UTF-8 and parses, else its raw bytes. It is the fingerprint the
// Node and Python packages compute for the same request. The middleware passes the
// request-target as received (r.RequestURI, as Express's originalUrl; r.URL.RequestURI()
// when it is empty), so a prefix an http.StripPrefix removed still counts.
func Fingerprint(method, requestURI string, body []byte, contentType string, canonical bool) []byte {
	input := body
	if canonical && len(body) > 0 && IsJSONType(contentType) && utf8.Valid(body) {
		if c, ok := CanonicalJSON(string(body)); ok {
			input = []byte(c)
		}
	}
	h := sha256.New()
	h.Write([]byte(method + "\n" + requestURI + "\n"))
	h.Write(input)
	return h.Sum(nil)
}
