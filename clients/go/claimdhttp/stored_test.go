package claimdhttp

import (
	"bytes"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// The Node and Python packages' tests hold the same bytes.
const (
	pythonStored    = "49444b3200c90000020c636f6e74656e742d7479706500106170706c69636174696f6e2f6a736f6e07782d6f726465720001377b226964223a377d"
	pythonNotStored = "49444b3200c901000107782d6f726465720001370000000000011170"
)

func TestStoredResponsesAreTheBytesTheNodeAndPythonPackagesStore(t *testing.T) {
	headers := []header{{"content-type", "application/json"}, {"x-order", "7"}}
	full := encodeResponse(201, headers, []byte(`{"id":7}`), 0)
	if hex.EncodeToString(full) != pythonStored {
		t.Fatalf("encoded %x", full)
	}
	partial := encodeResponse(201, headers[1:], nil, 70000)
	if hex.EncodeToString(partial) != pythonNotStored {
		t.Fatalf("encoded %x", partial)
	}
	raw, _ := hex.DecodeString(pythonStored)
	r, ok := decodeResponse(raw)
	if !ok || r.status != 201 || len(r.headers) != 2 || r.headers[1] != headers[1] || !bytes.Equal(r.body, []byte(`{"id":7}`)) {
		t.Fatalf("decoded %+v %v", r, ok)
	}
	raw, _ = hex.DecodeString(pythonNotStored)
	r, ok = decodeResponse(raw)
	if !ok || r.body != nil || r.bytes != 70000 || len(r.headers) != 1 {
		t.Fatalf("decoded %+v %v", r, ok)
	}
	if _, ok := decodeResponse([]byte("not a response")); ok {
		t.Fatal("decoded garbage")
	}
}

func TestStoredHeadersLeaveOutSetCookieHopByHopAndWhatConnectionNames(t *testing.T) {
	after := http.Header{
		"Content-Type":        {"application/json"},
		"X-Order":             {"7"},
		"Set-Cookie":          {"sid=secret"},
		"Connection":          {"keep-alive, X-Hop", "x-other"},
		"X-Hop":               {"1"},
		"X-Other":             {"2"},
		"Keep-Alive":          {"timeout=5"},
		"Transfer-Encoding":   {"chunked"},
		"Upgrade":             {"h2c"},
		"Te":                  {"trailers"},
		"Trailer":             {"X-Sum"},
		"Trailer:X-Sum":       {"9"},
		"Proxy-Authenticate":  {"Basic"},
		"Proxy-Status":        {"cache"},
		"Idempotent-Replayed": {"true"},
	}
	got := storedHeaders(after, http.Header{})
	want := []header{{"content-type", "application/json"}, {"x-order", "7"}}
	if !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	// A record another writer made with such headers replays without them.
	all := []header{{"connection", "X-Hop"}, {"x-hop", "1"}, {"set-cookie", "sid=secret"},
		{"proxy-status", "cache"}, {"x-order", "7"}}
	w := httptest.NewRecorder()
	(&middleware{}).replay(w, record{status: 201, headers: all, body: []byte("{}")})
	if h := w.Header(); len(h) != 2 || h.Get("X-Order") != "7" || h.Get(Replayed) != "true" {
		t.Fatalf("replayed headers %v", h)
	}
}
