package claimdhttp

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth: deeper JSON is fingerprinted by its raw bytes.
const maxJSONDepth = 512

// CanonicalJSON returns the canonical form of a JSON text, byte for byte what the Node
// package's canonicalJson returns: object keys sorted by code point (the last of
// duplicate names wins), no insignificant whitespace, strings as JavaScript's
// JSON.stringify writes them, numbers as they were written. ok is false when text is not
// JSON or nests deeper than 512.
func CanonicalJSON(text string) (canonical string, ok bool) {
	p := &parser{text: text}
	out, ok := p.value(0)
	if !ok {
		return "", false
	}
	p.space()
	return out, p.at == len(text)
}

type parser struct {
	text string
	at   int
}

func (p *parser) space() {
	for p.at < len(p.text) && strings.IndexByte(" \t\n\r", p.text[p.at]) >= 0 {
		p.at++
	}
}

func (p *parser) peek() byte {
	if p.at < len(p.text) {
		return p.text[p.at]
	}
	return 0
}

func (p *parser) value(depth int) (string, bool) {
	if depth > maxJSONDepth {
		return "", false
	}
	p.space()
	switch p.peek() {
	case '{':
		return p.object(depth)
	case '[':
		return p.array(depth)
	case '"':
		units, ok := p.str()
		if !ok {
			return "", false
		}
		return stringify(units), true
	}
	for _, literal := range []string{"true", "false", "null"} {
		if strings.HasPrefix(p.text[p.at:], literal) {
			p.at += len(literal)
			return literal, true
		}
	}
	return p.number()
}

type member struct {
	name  []uint16
	value string
}

func (p *parser) object(depth int) (string, bool) {
	p.at++
	p.space()
	if p.peek() == '}' {
		p.at++
		return "{}", true
	}
	index := map[string]int{}
	var members []member
	for {
		p.space()
		name, ok := p.str()
		if !ok {
			return "", false
		}
		p.space()
		if p.peek() != ':' {
			return "", false
		}
		p.at++
		inner, ok := p.value(depth + 1)
		if !ok {
			return "", false
		}
		id := string(utf16Bytes(name))
		if i, seen := index[id]; seen {
			members[i].value = inner // the last one wins
		} else {
			index[id] = len(members)
			members = append(members, member{name, inner})
		}
		p.space()
		if p.peek() == ',' {
			p.at++
		} else if p.peek() == '}' {
			break
		} else {
			return "", false
		}
	}
	p.at++
	sort.Slice(members, func(i, j int) bool { return byCodePoint(members[i].name, members[j].name) < 0 })
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(stringify(m.name))
		b.WriteByte(':')
		b.WriteString(m.value)
	}
	b.WriteByte('}')
	return b.String(), true
}

func (p *parser) array(depth int) (string, bool) {
	p.at++
	p.space()
	if p.peek() == ']' {
		p.at++
		return "[]", true
	}
	var items []string
	for {
		inner, ok := p.value(depth + 1)
		if !ok {
			return "", false
		}
		items = append(items, inner)
		p.space()
		if p.peek() == ',' {
			p.at++
		} else if p.peek() == ']' {
			break
		} else {
			return "", false
		}
	}
	p.at++
	return "[" + strings.Join(items, ",") + "]", true
}

// number matches -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and returns it as written.
func (p *parser) number() (string, bool) {
	start, at, s := p.at, p.at, p.text
	digits := func(from int) int {
		for from < len(s) && s[from] >= '0' && s[from] <= '9' {
			from++
		}
		return from
	}
	if at < len(s) && s[at] == '-' {
		at++
	}
	switch {
	case at < len(s) && s[at] == '0':
		at++
	case at < len(s) && s[at] >= '1' && s[at] <= '9':
		at = digits(at)
	default:
		return "", false
	}
	if at+1 < len(s) && s[at] == '.' && s[at+1] >= '0' && s[at+1] <= '9' {
		at = digits(at + 1)
	}
	if at < len(s) && (s[at] == 'e' || s[at] == 'E') {
		e := at + 1
		if e < len(s) && (s[e] == '+' || s[e] == '-') {
			e++
		}
		if e < len(s) && s[e] >= '0' && s[e] <= '9' {
			at = digits(e)
		}
	}
	p.at = at
	return s[start:at], true
}

// str reads a JSON string and returns its UTF-16 code units (lone surrogates kept).
func (p *parser) str() ([]uint16, bool) {
	s := p.text
	if p.peek() != '"' {
		return nil, false
	}
	at := p.at + 1
	var units []uint16
	for at < len(s) {
		c := s[at]
		switch {
		case c == '"':
			p.at = at + 1
			return units, true
		case c < 0x20:
			return nil, false
		case c == '\\':
			if at+1 >= len(s) {
				return nil, false
			}
			e := s[at+1]
			if i := strings.IndexByte(`"\/bfnrt`, e); i >= 0 {
				units = append(units, uint16("\"\\/\b\f\n\r\t"[i]))
				at += 2
				continue
			}
			if e != 'u' || at+6 > len(s) {
				return nil, false
			}
			var u uint16
			if _, err := fmt.Sscanf(s[at+2:at+6], "%04x", &u); err != nil || !isHex(s[at+2:at+6]) {
				return nil, false
			}
			units = append(units, u)
			at += 6
		default:
			r, size := utf8.DecodeRuneInString(s[at:])
			units = utf16.AppendRune(units, r)
			at += size
		}
	}
	return nil, false
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte("0123456789abcdefABCDEF", s[i]) < 0 {
			return false
		}
	}
	return true
}
