package claimdhttp

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"sort"
	"strings"
)

// A stored response is `IDK2`, the status (u16), flags (u8; 1 = the body was too large to
// keep), the number of headers (u16), each header as name length (u8), lowercase name,
// value length (u16) and value (bytes); then the body, or, when it was not kept, its
// length in bytes (u64). It is the Node and Python packages' format: each package replays
// what another stored.

const (
	magic         = "IDK2"
	bodyNotStored = 1
	// Replayed is the response header that marks a replayed response.
	Replayed = "Idempotent-Replayed"
)

// unstored are the response headers never stored (nor replayed): hop-by-hop, recomputed,
// or credentials. So are every Proxy-* header, the headers a response's Connection header
// names (hop-by-hop too), and trailers (net/http's "Trailer:" prefixed names).
var unstored = map[string]bool{
	"connection": true, "keep-alive": true, "te": true, "trailer": true,
	"transfer-encoding": true, "upgrade": true, "content-length": true, "date": true,
	"set-cookie": true, "set-cookie2": true, "idempotent-replayed": true,
}

// dropped returns whether a header (its lowercase name) is never stored nor replayed,
// given the lowercase names the response's Connection header lists.
func dropped(lower string, connectionNamed map[string]bool) bool {
	return unstored[lower] || connectionNamed[lower] || strings.HasPrefix(lower, "proxy-") ||
		strings.HasPrefix(lower, "trailer:")
}

// connectionNamed is the set of header names (lowercase) that the Connection header values
// list, e.g. "close, X-Hop" → close and x-hop.
func connectionNamed(values []string) map[string]bool {
	named := map[string]bool{}
	for _, v := range values {
		for token := range strings.SplitSeq(v, ",") {
			if token = strings.ToLower(strings.Trim(token, " \t")); token != "" {
				named[token] = true
			}
		}
	}
	return named
}

// header is one stored header line.
type header struct{ name, value string }

// record is a decoded stored response; body is nil when it was not kept (bytes long).
type record struct {
	status  int
	headers []header
	body    []byte
	bytes   uint64
}

// encodeResponse encodes a response; with body nil the record says the body (n bytes
// long) was not kept.
func encodeResponse(status int, headers []header, body []byte, n uint64) []byte {
	var b bytes.Buffer
	b.WriteString(magic)
	b.Write(binary.BigEndian.AppendUint16(nil, uint16(status)))
	if body == nil {
		b.WriteByte(bodyNotStored)
	} else {
		b.WriteByte(0)
	}
	var kept []header
	for _, h := range headers {
		if len(h.name) <= 0xff && len(h.value) <= 0xffff {
			kept = append(kept, h)
		}
	}
	b.Write(binary.BigEndian.AppendUint16(nil, uint16(len(kept))))
	for _, h := range kept {
		b.WriteByte(byte(len(h.name)))
		b.WriteString(strings.ToLower(h.name))
		b.Write(binary.BigEndian.AppendUint16(nil, uint16(len(h.value))))
		b.WriteString(h.value)
	}
	if body == nil {
		b.Write(binary.BigEndian.AppendUint64(nil, n))
	} else {
		b.Write(body)
	}
	return b.Bytes()
}

// decodeResponse decodes what encodeResponse made; ok is false for anything else.
func decodeResponse(data []byte) (r record, ok bool) {
	if len(data) < 9 || string(data[:4]) != magic {
		return r, false
	}
	r.status = int(binary.BigEndian.Uint16(data[4:]))
	flags := data[6]
	count := int(binary.BigEndian.Uint16(data[7:]))
	at := 9
	for i := 0; i < count; i++ {
		if at+1 > len(data) {
			return r, false
		}
		nameEnd := at + 1 + int(data[at])
		if nameEnd+2 > len(data) {
			return r, false
		}
		valueEnd := nameEnd + 2 + int(binary.BigEndian.Uint16(data[nameEnd:]))
		if valueEnd > len(data) {
			return r, false
		}
		r.headers = append(r.headers, header{string(data[at+1 : nameEnd]), string(data[nameEnd+2 : valueEnd])})
		at = valueEnd
	}
	if r.status < 100 || r.status > 999 {
		return r, false
	}
	if flags&bodyNotStored != 0 {
		if at+8 != len(data) {
			return r, false
		}
		r.bytes = binary.BigEndian.Uint64(data[at:])
		return r, true
	}
	r.body = append([]byte{}, data[at:]...)
	r.bytes = uint64(len(r.body))
	return r, true
}

// storedHeaders returns the headers to store of a finished response: content-type, and
// those the handler set or changed (not those set before it ran), none that is dropped.
func storedHeaders(after, before http.Header) []header {
	names := make([]string, 0, len(after))
	var connection []string // a handler may have set it under a name net/http did not canonicalize
	for name, values := range after {
		names = append(names, name)
		if strings.EqualFold(name, "Connection") {
			connection = append(connection, values...)
		}
	}
	hop := connectionNamed(connection)
	sort.Strings(names)
	var out []header
	for _, name := range names {
		lower := strings.ToLower(name)
		values := after[name]
		if dropped(lower, hop) || len(values) == 0 {
			continue
		}
		if lower != "content-type" && strings.Join(before.Values(name), "\n") == strings.Join(values, "\n") {
			continue
		}
		for _, v := range values {
			out = append(out, header{lower, v})
		}
	}
	return out
}
