package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// fileJSON is the part of a Hugging Face tokenizer.json kvrouter reads.
type fileJSON struct {
	AddedTokens   []addedJSON     `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Model         modelJSON       `json:"model"`
}

type addedJSON struct {
	ID         uint32 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string          `json:"type"`
	Vocab                   json.RawMessage `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	ByteFallback            bool            `json:"byte_fallback"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	Dropout                 *float64        `json:"dropout"`
}

// component is one normalizer, pre-tokenizer or post-processor entry.
type component struct {
	Type           string            `json:"type"`
	Normalizers    []json.RawMessage `json:"normalizers"`
	Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	Processors     []json.RawMessage `json:"processors"`
	Pattern        patternJSON       `json:"pattern"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
	Single         []templatePiece   `json:"single"`
	SpecialTokens  map[string]struct {
		IDs []uint32 `json:"ids"`
	} `json:"special_tokens"`
}

type patternJSON struct {
	Regex  *string `json:"Regex"`
	String *string `json:"String"`
}

type templatePiece struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

// maxFileBytes bounds a tokenizer.json (the largest known are ~30 MB).
const maxFileBytes = 512 << 20

// Load reads a tokenizer.json file (or a gzipped one, by its magic bytes).
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse builds a Tokenizer from the bytes of a tokenizer.json (plain or
// gzipped). It refuses, with the reason, any file whose model or pipeline
// step it would not reproduce exactly: only byte-level BPE is supported.
func Parse(data []byte) (*Tokenizer, error) {
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		// The trailer holds the plain size (mod 2^32): one allocation.
		var buf bytes.Buffer
		if n := len(data); n >= 8 {
			buf.Grow(min(int(binary.LittleEndian.Uint32(data[n-4:])), maxFileBytes) + bytes.MinRead)
		}
		if _, err = buf.ReadFrom(io.LimitReader(zr, maxFileBytes+1)); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		if buf.Len() > maxFileBytes {
			return nil, fmt.Errorf("gzip: more than %d bytes uncompressed", maxFileBytes)
		}
		data = buf.Bytes()
	}
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	return build(&f)
}

func build(f *fileJSON) (*Tokenizer, error) {
	m := &f.Model
	if m.Type != "BPE" {
		return nil, fmt.Errorf("model type %q: only byte-level BPE is supported", m.Type)
	}
	if m.ByteFallback || m.Dropout != nil && *m.Dropout != 0 ||
		m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" ||
		m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return nil, fmt.Errorf("BPE options byte_fallback, dropout, continuing_subword_prefix and end_of_word_suffix are not supported")
	}
	vocab, err := parseVocab(m.Vocab)
	if err != nil {
		return nil, fmt.Errorf("model.vocab: %w", err)
	}
	merges, err := parseMergeList(m.Merges)
	if err != nil {
		return nil, fmt.Errorf("model.merges: %w", err)
	}
	t := &Tokenizer{}
	if t.bpe, err = newBPE(vocab, merges, m.IgnoreMerges); err != nil {
		return nil, err
	}
	if t.normalize, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	byteLevel := false
	if t.splits, t.prefixSpace, byteLevel, err = parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if !byteLevel {
		return nil, fmt.Errorf("pre_tokenizer has no ByteLevel step: only byte-level BPE is supported")
	}
	if t.prefix, t.suffix, err = parsePostProcessor(f.PostProcessor); err != nil {
		return nil, err
	}
	if t.raw, t.normalized, err = newAddedTokens(f.AddedTokens); err != nil {
		return nil, err
	}
	return t, nil
}

func isNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	switch c.Type {
	case "NFC", "NFD", "NFKC", "NFKD":
		return unicodeForm{forms[c.Type]}, nil
	case "Sequence":
		var seq []normalizer
		for _, r := range c.Normalizers {
			n, err := parseNormalizer(r)
			if err != nil {
				return nil, err
			}
			if n != nil {
				seq = append(seq, n)
			}
		}
		return chain(seq), nil
	}
	return nil, fmt.Errorf("normalizer %q is not supported", c.Type)
}

// parsePreTokenizer returns the Split steps in order, whether ByteLevel adds
// a prefix space, and whether a ByteLevel step is present at all.
func parsePreTokenizer(raw json.RawMessage) (splits []splitter, prefixSpace, byteLevel bool, err error) {
	if isNull(raw) {
		return nil, false, false, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, false, false, fmt.Errorf("pre_tokenizer: %w", err)
	}
	switch c.Type {
	case "Sequence":
		for _, r := range c.Pretokenizers {
			s, ps, bl, err := parsePreTokenizer(r)
			if err != nil {
				return nil, false, false, err
			}
			if ps && len(splits) > 0 {
				return nil, false, false, fmt.Errorf("ByteLevel add_prefix_space after a Split step is not supported")
			}
			splits = append(splits, s...)
			prefixSpace = prefixSpace || ps
			byteLevel = byteLevel || bl
		}
		return splits, prefixSpace, byteLevel, nil
	case "Split":
		if c.Behavior != "Isolated" || c.Invert {
			return nil, false, false, fmt.Errorf("Split behavior %q (invert %v) is not supported, only Isolated", c.Behavior, c.Invert)
		}
		var s splitter
		switch {
		case c.Pattern.Regex != nil:
			s, err = newRegexSplitter(*c.Pattern.Regex)
		case c.Pattern.String != nil:
			s, err = newRegexSplitter(regexpQuote(*c.Pattern.String))
		default:
			err = fmt.Errorf("Split has no pattern")
		}
		if err != nil {
			return nil, false, false, err
		}
		return []splitter{s}, false, false, nil
	case "ByteLevel":
		if c.UseRegex == nil || *c.UseRegex {
			s, err := newRegexSplitter(gpt2Pattern)
			if err != nil {
				return nil, false, false, err
			}
			splits = []splitter{s}
		}
		return splits, c.AddPrefixSpace, true, nil
	}
	return nil, false, false, fmt.Errorf("pre_tokenizer %q is not supported", c.Type)
}

// parsePostProcessor returns the ids a TemplateProcessing "single" template
// puts before and after the sequence; ByteLevel post-processing changes only
// offsets, so it adds nothing.
func parsePostProcessor(raw json.RawMessage) (prefix, suffix []uint32, err error) {
	if isNull(raw) {
		return nil, nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, nil, fmt.Errorf("post_processor: %w", err)
	}
	switch c.Type {
	case "ByteLevel":
		return nil, nil, nil
	case "Sequence":
		for _, r := range c.Processors {
			p, s, err := parsePostProcessor(r)
			if err != nil {
				return nil, nil, err
			}
			prefix, suffix = append(prefix, p...), append(suffix, s...)
		}
		return prefix, suffix, nil
	case "TemplateProcessing":
		seen := false
		for _, p := range c.Single {
			switch {
			case p.Sequence != nil:
				seen = true
			case p.SpecialToken != nil:
				st, ok := c.SpecialTokens[p.SpecialToken.ID]
				if !ok {
					return nil, nil, fmt.Errorf("TemplateProcessing: special token %q not defined", p.SpecialToken.ID)
				}
				if seen {
					suffix = append(suffix, st.IDs...)
				} else {
					prefix = append(prefix, st.IDs...)
				}
			}
		}
		return prefix, suffix, nil
	}
	return nil, nil, fmt.Errorf("post_processor %q is not supported", c.Type)
}
