package claimdhttp

import (
	"fmt"
	"strings"
	"unicode/utf16"
)

// JSON strings as JavaScript sees them: sequences of UTF-16 code units.

// stringify writes UTF-16 code units as JSON.stringify writes a string.
func stringify(units []uint16) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(units); i++ {
		u := units[i]
		switch {
		case u == '"':
			b.WriteString(`\"`)
		case u == '\\':
			b.WriteString(`\\`)
		case u == '\b':
			b.WriteString(`\b`)
		case u == '\f':
			b.WriteString(`\f`)
		case u == '\n':
			b.WriteString(`\n`)
		case u == '\r':
			b.WriteString(`\r`)
		case u == '\t':
			b.WriteString(`\t`)
		case u < 0x20:
			fmt.Fprintf(&b, `\u%04x`, u)
		case utf16.IsSurrogate(rune(u)):
			if u < 0xdc00 && i+1 < len(units) && units[i+1] >= 0xdc00 && units[i+1] <= 0xdfff {
				b.WriteRune(utf16.DecodeRune(rune(u), rune(units[i+1])))
				i++
			} else {
				fmt.Fprintf(&b, `\u%04x`, u) // a lone surrogate
			}
		default:
			b.WriteRune(rune(u))
		}
	}
	b.WriteByte('"')
	return b.String()
}

// codePointAt is JavaScript's String.prototype.codePointAt on code units.
func codePointAt(s []uint16, i int) int {
	u := s[i]
	if u >= 0xd800 && u < 0xdc00 && i+1 < len(s) && s[i+1] >= 0xdc00 && s[i+1] <= 0xdfff {
		return int(utf16.DecodeRune(rune(u), rune(s[i+1])))
	}
	return int(u)
}

// byCodePoint orders names as the Node package's byCodePoint does.
func byCodePoint(a, b []uint16) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return codePointAt(a, i) - codePointAt(b, i)
		}
	}
	return len(a) - len(b)
}

func utf16Bytes(units []uint16) []byte {
	out := make([]byte, 0, 2*len(units))
	for _, u := range units {
		out = append(out, byte(u>>8), byte(u))
	}
	return out
}
