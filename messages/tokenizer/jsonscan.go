package tokenizer

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A reader for the two large parts of a tokenizer.json — the vocabulary
// (an object of string → id) and the merges (an array of pairs or of
// "a b" strings) — several times faster than encoding/json's reflection,
// which dominated loading a 27 MB file. The input was already validated by
// encoding/json (json.Unmarshal into RawMessage checks the whole document),
// so this reader only has to be right on valid JSON; it still reports,
// rather than trusts, anything unexpected.
type jsonScan struct {
	s   []byte
	i   int
	buf []byte
}

func (p *jsonScan) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonScan) errorf(format string, a ...any) error {
	return fmt.Errorf("offset %d: %s", p.i, fmt.Sprintf(format, a...))
}

// expect consumes c after whitespace.
func (p *jsonScan) expect(c byte) error {
	p.ws()
	if p.i >= len(p.s) || p.s[p.i] != c {
		return p.errorf("want %q", c)
	}
	p.i++
	return nil
}

// peek returns the next non-space byte (0 at the end).
func (p *jsonScan) peek() byte {
	p.ws()
	if p.i >= len(p.s) {
		return 0
	}
	return p.s[p.i]
}

// str reads a JSON string.
func (p *jsonScan) str() (string, error) {
	if err := p.expect('"'); err != nil {
		return "", err
	}
	start := p.i
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == '"':
			out := string(p.s[start:p.i])
			p.i++
			return out, nil
		case c == '\\':
			return p.escaped(start)
		default:
			p.i++
		}
	}
	return "", p.errorf("unterminated string")
}

// escaped finishes a string holding escapes, from its start.
func (p *jsonScan) escaped(start int) (string, error) {
	p.buf = append(p.buf[:0], p.s[start:p.i]...)
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(p.buf), nil
		case c != '\\':
			p.buf = append(p.buf, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.s) {
			break
		}
		e := p.s[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			p.buf = append(p.buf, e)
		case 'b':
			p.buf = append(p.buf, '\b')
		case 'f':
			p.buf = append(p.buf, '\f')
		case 'n':
			p.buf = append(p.buf, '\n')
		case 'r':
			p.buf = append(p.buf, '\r')
		case 't':
			p.buf = append(p.buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.errorf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if p.i+1 < len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
					p.i += 2
					r2, _ = p.hex4()
				}
				r = utf16.DecodeRune(r, r2)
			}
			p.buf = utf8.AppendRune(p.buf, r)
		default:
			return "", p.errorf("bad escape \\%c", e)
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *jsonScan) hex4() (rune, bool) {
	if p.i+4 > len(p.s) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(p.s[p.i:p.i+4]), 16, 32)
	p.i += 4
	return rune(n), err == nil
}

// uint reads a non-negative integer that fits an id.
func (p *jsonScan) uint() (uint32, error) {
	p.ws()
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	n, err := strconv.ParseUint(string(p.s[start:p.i]), 10, 32)
	if err != nil {
		return 0, p.errorf("want a token id: %v", err)
	}
	return uint32(n), nil
}

// list reads a JSON array, calling item for each element.
func (p *jsonScan) list(item func() error) error {
	if err := p.expect('['); err != nil {
		return err
	}
	if p.peek() == ']' {
		p.i++
		return nil
	}
	for {
		if err := item(); err != nil {
			return err
		}
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			return nil
		default:
			return p.errorf("want , or ]")
		}
	}
}

// parseVocab reads model.vocab.
func parseVocab(raw []byte) (map[string]uint32, error) {
	p := &jsonScan{s: raw}
	if err := p.expect('{'); err != nil {
		return nil, err
	}
	vocab := make(map[string]uint32, len(raw)/16)
	if p.peek() == '}' {
		return vocab, nil
	}
	for {
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		if err := p.expect(':'); err != nil {
			return nil, err
		}
		id, err := p.uint()
		if err != nil {
			return nil, err
		}
		vocab[k] = id
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			return vocab, nil
		default:
			return nil, p.errorf("want , or }")
		}
	}
}

// parseMergeList reads model.merges: pairs, or "a b" strings (older files).
func parseMergeList(raw []byte) ([][2]string, error) {
	p := &jsonScan{s: raw}
	var out [][2]string
	err := p.list(func() error {
		if p.peek() == '"' {
			l, err := p.str()
			if err != nil {
				return err
			}
			a, b, ok := cutSpace(l)
			if !ok {
				return fmt.Errorf("merge %d %q: not two symbols", len(out), l)
			}
			out = append(out, [2]string{a, b})
			return nil
		}
		var pair [2]string
		n := 0
		err := p.list(func() error {
			if n == 2 {
				return p.errorf("merge %d: more than two symbols", len(out))
			}
			var err error
			pair[n], err = p.str()
			n++
			return err
		})
		if err == nil && n != 2 {
			err = fmt.Errorf("merge %d: %d symbols", len(out), n)
		}
		out = append(out, pair)
		return err
	})
	return out, err
}

// cutSpace splits "a b" at its one space.
func cutSpace(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			a, b := s[:i], s[i+1:]
			for j := 0; j < len(b); j++ {
				if b[j] == ' ' {
					return "", "", false
				}
			}
			return a, b, a != "" && b != ""
		}
	}
	return "", "", false
}
