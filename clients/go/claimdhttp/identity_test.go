package claimdhttp

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
)

// nodeVectors is testdata/node-vectors.json, written by testdata/node-vectors.js from the
// Node package's request-identity.js.
type nodeVectors struct {
	Vectors [][3]*string `json:"vectors"`
	Extra   struct {
		Raw       string       `json:"raw"`
		Vnd       string       `json:"vnd"`
		Empty     string       `json:"empty"`
		BadUTF8   string       `json:"badutf8"`
		ClaimKeys [][3]string  `json:"claimKeys"`
		Keys      [][2]*string `json:"keys"`
	} `json:"extra"`
}

func loadVectors(t *testing.T) nodeVectors {
	raw, err := os.ReadFile("testdata/node-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v nodeVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCanonicalJSONAndFingerprintsAreTheNodePackagesBytes(t *testing.T) {
	v := loadVectors(t)
	if len(v.Vectors) < 20 {
		t.Fatalf("only %d vectors", len(v.Vectors))
	}
	for _, vec := range v.Vectors {
		in := *vec[0]
		got, ok := CanonicalJSON(in)
		if vec[1] == nil {
			if ok {
				t.Errorf("CanonicalJSON(%q) = %q, Node says not JSON", in, got)
			}
		} else if !ok || got != *vec[1] {
			t.Errorf("CanonicalJSON(%q) = %q %v, Node says %q", in, got, ok, *vec[1])
		}
		fp := Fingerprint("POST", "/orders?dry=1", []byte(in), "application/json; charset=utf-8", true)
		if hex.EncodeToString(fp) != *vec[2] {
			t.Errorf("Fingerprint of %q differs from Node's", in)
		}
	}
	e := v.Extra
	for _, c := range []struct{ method, uri, body, ctype, want string }{
		{"PATCH", "/a/b", `{"b":1,"a":2}`, "text/plain", e.Raw},
		{"POST", "/x", `{"b":1,"a":2}`, "application/vnd.api+json", e.Vnd},
		{"POST", "/x", "", "application/json", e.Empty},
		{"POST", "/x", "{\xff}", "application/json", e.BadUTF8},
	} {
		if got := hex.EncodeToString(Fingerprint(c.method, c.uri, []byte(c.body), c.ctype, true)); got != c.want {
			t.Errorf("Fingerprint(%s %s %q %s) differs from Node's", c.method, c.uri, c.body, c.ctype)
		}
	}
}

func TestKeysParseAndClaimKeysAreBuiltAsInTheNodePackage(t *testing.T) {
	v := loadVectors(t)
	for _, k := range v.Extra.Keys {
		got, ok := ParseKey(*k[0])
		if k[1] == nil {
			if ok {
				t.Errorf("ParseKey(%q) = %q, Node says invalid", *k[0], got)
			}
		} else if !ok || got != *k[1] {
			t.Errorf("ParseKey(%q) = %q %v, Node says %q", *k[0], got, ok, *k[1])
		}
	}
	for _, c := range v.Extra.ClaimKeys {
		if got := ClaimKey(c[0], c[1]); got != c[2] {
			t.Errorf("ClaimKey(%q, %q) = %q, Node says %q", c[0], c[1], got, c[2])
		}
	}
}
