package wire

import (
	"bytes"

	"github.com/zeebo/xxh3"
)

// saltMarker prefixes a cache salt carried in extra_keys (Dynamo's and
// newer SGLang's convention).
const saltMarker = "dynamo-cache-salt:"

// extraKeys reads extra_keys: nil, or one entry per block that is nil or a
// list of items. vLLM builds each block's items as LoRA name (bare string,
// every block), multimodal items ([identifier, offset] pairs), the cache
// salt (bare string, block 0 only) and the prompt-embeds digest (bytes: the
// SHA-256 of the block's slice of the prompt embeddings, last); its typed
// variant sends maps {"type": "mm"|"lora"|"cache_salt"|"prompt_embeds"|…, …}.
// kvrouter reads:
//   - "dynamo-cache-salt:<salt>" (any block) and {"type": "cache_salt",
//     "salt": s}: the cache salt;
//   - a bare string in block 0 that is not the event's lora_name: vLLM's
//     cache salt (resolved once lora_name is known);
//   - [identifier, offset] and {"type": "mm", "hash": h}: a multimodal
//     identifier, folded into the block's mm hashes as XXH3-64(identifier)
//     (an integer hash is taken as is);
//   - bytes and {"type": "prompt_embeds", "hash": bytes}: the block's
//     prompt-embeds digest, folded into the block's mm hashes as
//     embedsHash(digest) — vLLM puts it into its block hash, so two
//     prompt-embeds requests with the same placeholder tokens are different
//     blocks.
//
// Everything else (LoRA names, bare strings past block 0, numbers, other
// typed items) is opaque and skipped.
func (x *Decoder) extraKeys(st *eventState) error {
	return x.perBlock(st, "extra_keys", func(block int) error {
		cl, err := x.peek()
		if err != nil {
			return err
		}
		switch cl {
		case classStr:
			b, err := x.rawBytes()
			if err != nil {
				return err
			}
			if salt, ok := bytes.CutPrefix(b, []byte(saltMarker)); ok {
				st.setExtraSalt(string(salt))
			} else if block == 0 {
				st.bareExtra = append(st.bareExtra, string(b))
			}
			return nil
		case classBin:
			b, err := x.rawBytes()
			if err != nil {
				return err
			}
			st.ev.addMM(block, embedsHash(b))
			return nil
		case classArray:
			n, err := x.arrayLen()
			if err != nil {
				return err
			}
			if n >= 1 {
				if c, err := x.peek(); err != nil {
					return err
				} else if c == classStr {
					b, err := x.rawBytes()
					if err != nil {
						return err
					}
					st.ev.addMM(block, hashIdentifier(string(b)))
					n--
				}
			}
			return x.skipN(n)
		case classMap:
			return x.typedExtraKey(st, block)
		}
		return x.skip()
	})
}

// typedExtraKey reads one item of vLLM's typed extra keys.
func (x *Decoder) typedExtraKey(st *eventState, block int) error {
	n, err := x.mapLen()
	if err != nil {
		return err
	}
	var kind, salt string
	var hashBytes []byte // a str or bin "hash", copied
	var hashCl class
	var hashInt Opt[uint64]
	for i := 0; i < n; i++ {
		key, err := x.mapKeyRaw()
		if err != nil {
			return err
		}
		switch key {
		case "type":
			kind, err = x.optString("extra_keys type")
		case "salt":
			salt, err = x.optString("extra_keys salt")
		case "hash":
			cl, perr := x.peek()
			switch {
			case perr != nil:
				return perr
			case cl == classStr || cl == classBin:
				var b []byte
				if b, err = x.rawBytes(); err == nil {
					hashBytes, hashCl = append(hashBytes[:0], b...), cl
				}
			case cl == classInt:
				var h uint64
				h, err = x.hash("extra_keys hash")
				hashInt = Opt[uint64]{V: h, Ok: err == nil}
			default:
				err = x.skip()
			}
		default:
			err = x.skip()
		}
		if err != nil {
			return err
		}
	}
	switch kind {
	case "cache_salt":
		st.setExtraSalt(salt)
	case "mm":
		switch {
		case hashInt.Ok:
			st.ev.addMM(block, hashInt.V)
		case hashCl == classBin:
			if h, ok := x.fold(hashBytes); ok {
				st.ev.addMM(block, h)
			}
		case len(hashBytes) > 0:
			st.ev.addMM(block, hashIdentifier(string(hashBytes)))
		}
	case "prompt_embeds":
		if hashBytes == nil {
			return malformed("prompt_embeds extra key without a hash")
		}
		st.ev.addMM(block, embedsHash(hashBytes))
	}
	return nil
}

// mmInfos reads Dynamo's block_mm_infos: one entry per block, nil or an
// array/map whose first element / "mm_objects" key lists objects, each an
// array/map whose first element / "mm_hash" key is the object's hash.
func (x *Decoder) mmInfos(st *eventState) error {
	return x.perBlock(st, "block_mm_infos", func(block int) error {
		return x.firstOrKey("mm_objects", func() error {
			cl, err := x.peek()
			if err != nil || cl != classArray {
				return firstErr(err, x.skip())
			}
			n, err := x.arrayLen()
			if err != nil {
				return err
			}
			for i := 0; i < n; i++ {
				if err := x.firstOrKey("mm_hash", func() error {
					h, err := x.hash("mm_hash")
					if err == nil {
						st.ev.addMM(block, h)
					}
					return err
				}); err != nil {
					return err
				}
				if st.mmItems++; st.mmItems > x.lim.MaxExtraItems {
					return overLimit("more than %d multimodal items", x.lim.MaxExtraItems)
				}
			}
			return nil
		})
	})
}

// perBlock reads nil or an array with one entry per block; each entry is nil
// or an array of items handed to item with the block's index (for mmInfos the
// entry itself is handed over). Field errors in items are kept, the first
// reported.
func (x *Decoder) perBlock(st *eventState, name string, item func(block int) error) error {
	blocks, ok, err := x.arrayOrNil(name)
	if err != nil || !ok {
		return err
	}
	st.entries = blocks
	var bad fieldErrs
	keep := bad.keep
	for b := 0; b < blocks; b++ {
		cl, err := x.peek()
		if err != nil {
			return err
		}
		if cl == classNil {
			if err := x.decodeNil(); err != nil {
				return truncated(name, err)
			}
			continue
		}
		if name == "block_mm_infos" {
			if err := keep(item(b)); err != nil {
				return err
			}
			continue
		}
		if cl != classArray {
			if err := keep(firstErr(x.skip(), malformed("%s[%d] is a msgpack %s, want an array", name, b, cl))); err != nil {
				return err
			}
			continue
		}
		n, err := x.arrayLen()
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if st.mmItems++; st.mmItems > x.lim.MaxExtraItems {
				if err := x.skipN(n - i); err != nil {
					return err
				}
				return firstErr(x.skipN(blocks-b-1), overLimit("more than %d %s items", x.lim.MaxExtraItems, name))
			}
			if err := keep(item(b)); err != nil {
				return err
			}
		}
	}
	return bad.first
}

// firstOrKey hands the value's first array element, or its map entry named
// key, to read, and skips the rest of the container. Any other value is
// skipped. A field error of read is returned once the container is read
// through, so the next value is where the decoder stands.
func (x *Decoder) firstOrKey(key string, read func() error) error {
	cl, err := x.peek()
	if err != nil {
		return err
	}
	var bad fieldErrs
	switch cl {
	case classArray:
		n, err := x.arrayLen()
		if err != nil || n == 0 {
			return err
		}
		if err := bad.keep(read()); err != nil {
			return err
		}
		return firstErr(x.skipN(n-1), bad.first)
	case classMap:
		n, err := x.mapLen()
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			k, err := x.mapKeyRaw()
			if err != nil {
				return err
			}
			if k == key {
				err = bad.keep(read())
			} else {
				err = x.skip()
			}
			if err != nil {
				return err
			}
		}
		return bad.first
	}
	return x.skip()
}

// addMM records multimodal hash h for block.
func (ev *Event) addMM(block int, h uint64) {
	if len(ev.MM) <= block {
		ev.MM = append(ev.MM, make([][]uint64, block+1-len(ev.MM))...)
	}
	ev.MM[block] = append(ev.MM[block], h)
}

// embedsSeed keeps prompt-embeds digests apart from multimodal identifiers
// in the hashes a block folds in.
const embedsSeed = 0x656d62656473 // "embeds"

// embedsHash turns a prompt-embeds digest (raw bytes, as vLLM sends it in
// either form) into the u64 the block hash folds in.
func embedsHash(digest []byte) uint64 {
	return xxh3.HashSeed(digest, embedsSeed)
}

// hashIdentifier turns a multimodal identifier string into the u64 hash
// the block hash folds in.
func hashIdentifier(id string) uint64 {
	return xxh3.HashString(id)
}
