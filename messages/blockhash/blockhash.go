// Package blockhash is kvrouter's local block-hash scheme. Stored events and
// route requests both go through it, so a prompt's blocks match the blocks an
// engine reported holding. It follows NVIDIA Dynamo's scheme for
// compatibility:
//
//   - XXH3-64 over each complete block's token ids as u32 little-endian,
//     seed 1337 (DefaultSeed); a trailing partial block is not hashed.
//   - EAGLE/bigram pages hash a window of blockSize+1 tokens with stride
//     blockSize.
//   - Multimodal blocks append their mm hashes, sorted ascending, as u64
//     little-endian after the tokens.
//   - A LoRA adapter and/or cache salt replace the seed (NamespaceSeed), so
//     blocks of different namespaces never collide.
//   - The sequence hash chains local hashes: seq[0] = local[0],
//     seq[i] = XXH3(le(seq[i-1]) ‖ le(local[i]), 1337).
//
// Why kvrouter recomputes hashes instead of trusting the engine's: route
// requests carry tokens, not engine hashes, and engines hash differently
// (vLLM's digest depends on its hash seed and extra keys, SGLang's is a
// SHA-256 prefix). The engine's hashes are kept per (worker, dp_rank) only
// to resolve a stored event's parent and a remove (actors/indexer). A
// block-size, seed or namespace mismatch between events and requests
// shows up as 0 % hits, so the normalizer rejects events whose block size
// differs from the worker's (block_size_mismatch) and route requests must
// name the same LoRA and salt. The tests pin the XXH3 implementation with
// xxHash's published vectors.
package blockhash

import (
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// Seed is an XXH3 seed that selects a hash namespace.
type Seed uint64

// DefaultSeed is the seed of the default namespace (no LoRA, no salt).
const DefaultSeed Seed = 1337

// NamespaceSeed returns the seed for blocks computed under a LoRA adapter
// and/or a cache salt. With both empty it is DefaultSeed. Otherwise it is
// XXH3-64, seed 1337, of
//
//	"kvrouter-ns-v1" ‖ u32le(len(lora)) ‖ lora ‖ u32le(len(salt)) ‖ salt
//
// The length prefixes keep ("ab","c") and ("a","bc") apart, and a LoRA name
// can never be mistaken for a salt of the same spelling.
func NamespaceSeed(lora, salt string) Seed {
	if lora == "" && salt == "" {
		return DefaultSeed
	}
	buf := make([]byte, 0, len(nsPrefix)+8+len(lora)+len(salt))
	buf = append(buf, nsPrefix...)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(lora)))
	buf = append(buf, lora...)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(salt)))
	buf = append(buf, salt...)
	return Seed(xxh3.HashSeed(buf, uint64(DefaultSeed)))
}

const nsPrefix = "kvrouter-ns-v1"

// Hasher computes local block hashes. Its scratch buffer is reused, so a
// Hasher must not be shared between goroutines; the zero value is ready.
type Hasher struct {
	buf []byte
}

// Options modify how blocks are cut and hashed.
type Options struct {
	// Seed selects the namespace; 0 means DefaultSeed.
	Seed Seed
	// Eagle hashes windows of blockSize+1 tokens with stride blockSize.
	Eagle bool
	// MM, when set, returns block i's multimodal hashes (any order; they are
	// sorted in place). Nil or an empty result means a text-only block.
	MM func(block int) []uint64
}

// CompleteBlocks is the number of blocks Hash would produce for n tokens.
func CompleteBlocks(n, blockSize int, eagle bool) int {
	if blockSize <= 0 {
		return 0
	}
	if eagle {
		if n < blockSize+1 {
			return 0
		}
		return (n - 1) / blockSize
	}
	return n / blockSize
}

// Hash appends the local hash of every complete block of tokens to dst and
// returns it.
func (h *Hasher) Hash(dst []uint64, tokens []uint32, blockSize int, opt Options) []uint64 {
	seed := uint64(opt.Seed)
	if seed == 0 {
		seed = uint64(DefaultSeed)
	}
	n := CompleteBlocks(len(tokens), blockSize, opt.Eagle)
	width := blockSize
	if opt.Eagle {
		width++
	}
	for i := 0; i < n; i++ {
		block := tokens[i*blockSize : i*blockSize+width]
		var mm []uint64
		if opt.MM != nil {
			mm = opt.MM(i)
		}
		dst = append(dst, h.block(block, mm, seed))
	}
	return dst
}

func (h *Hasher) block(tokens []uint32, mm []uint64, seed uint64) uint64 {
	if len(mm) == 0 && littleEndian {
		return xxh3.HashSeed(u32Bytes(tokens), seed)
	}
	h.buf = h.buf[:0]
	for _, t := range tokens {
		h.buf = binary.LittleEndian.AppendUint32(h.buf, t)
	}
	slices.Sort(mm)
	for _, m := range mm {
		h.buf = binary.LittleEndian.AppendUint64(h.buf, m)
	}
	return xxh3.HashSeed(h.buf, seed)
}

// Sequence appends the sequence hashes of local (see the package comment) to
// dst and returns it.
func Sequence(dst []uint64, local []uint64) []uint64 {
	var pair [16]byte
	for i, l := range local {
		if i == 0 {
			dst = append(dst, l)
			continue
		}
		binary.LittleEndian.PutUint64(pair[:8], dst[len(dst)-1])
		binary.LittleEndian.PutUint64(pair[8:], l)
		dst = append(dst, xxh3.HashSeed(pair[:], uint64(DefaultSeed)))
	}
	return dst
}

// littleEndian reports whether u32 slices can be hashed in place.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// u32Bytes views tokens as their little-endian bytes without copying; only
// valid on little-endian machines.
func u32Bytes(tokens []uint32) []byte {
	if len(tokens) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), len(tokens)*4)
}
