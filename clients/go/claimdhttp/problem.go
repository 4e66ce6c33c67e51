package claimdhttp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// problem is an RFC 9457 problem, its members in the Node package's order.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
}

// sendProblem answers an application/problem+json problem; extra holds header pairs.
func sendProblem(w http.ResponseWriter, docsURL string, status int, code, title, detail string, extra ...string) {
	p := problem{Type: "about:blank", Title: title, Status: status, Detail: detail, Code: code}
	if docsURL != "" {
		p.Type = docsURL + "#" + code
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="describedby"; type="text/html"`, docsURL))
	}
	for i := 0; i+1 < len(extra); i += 2 {
		w.Header().Set(extra[i], extra[i+1])
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false) // as JSON.stringify writes it
	_ = enc.Encode(p)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(bytes.TrimSuffix(body.Bytes(), []byte("\n")))
}

// secondsUntil is the whole seconds (at least 1) until ts, for Retry-After.
func secondsUntil(ts *timestamppb.Timestamp) string {
	var at time.Time
	if ts != nil {
		at = ts.AsTime()
	}
	s := math.Ceil(time.Until(at).Seconds())
	return strconv.Itoa(int(max(1, s)))
}

// codeName is a gRPC code as the proto names it, e.g. "DEADLINE_EXCEEDED".
func codeName(name string) string {
	var b []byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		if i > 0 && c >= 'A' && c <= 'Z' {
			b = append(b, '_')
		}
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(b)
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
