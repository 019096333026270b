package blockhash

import (
	"encoding/binary"
	"testing"

	"github.com/zeebo/xxh3"
)

// sanityBuffer is xxHash's test buffer (tests/sanity_test_vectors.h).
func sanityBuffer(n int) []byte {
	const prime32, prime64 = 2654435761, 0x9E3779B185EBCA8D
	buf := make([]byte, n)
	gen := uint64(prime32)
	for i := range buf {
		buf[i] = byte(gen >> 56)
		gen *= prime64
	}
	return buf
}

// TestXXH3PublishedVectors pins the hash function itself to xxHash's
// published XXH3-64 vectors, so a dependency change cannot silently change
// every block hash.
func TestXXH3PublishedVectors(t *testing.T) {
	const prime64 = 0x9E3779B185EBCA8D
	buf := sanityBuffer(256)
	for _, c := range []struct {
		n    int
		seed uint64
		want uint64
	}{
		{0, 0, 0x2D06800538D394C2},
		{0, prime64, 0xA8A6B918B2F0364A},
		{1, 0, 0xC44BDFF4074EECDB},
		{1, prime64, 0x032BE332DD766EF8},
		{6, 0, 0x27B56A84CD2D7325},
		{6, prime64, 0x84589C116AB59AB9},
		{12, 0, 0xA713DAF0DFBB77E7},
		{12, prime64, 0xE7303E1B2336DE0E},
		{24, 0, 0xA3FE70BF9D3510EB},
		{24, prime64, 0x850E80FC35BDD690},
		{48, 0, 0x397DA259ECBA1F11},
		{48, prime64, 0xADC2CBAA44ACC616},
		{128, 0, 0xFCFF24126754D861},
		{240, 0, 0x81C3C2B67F568CCF},
		{241, 0, 0xC5A639ECD2030E5E},
	} {
		if got := xxh3.HashSeed(buf[:c.n], c.seed); got != c.want {
			t.Errorf("XXH3-64(len %d, seed %#x) = %#x, want %#x", c.n, c.seed, got, c.want)
		}
	}
}

// leBytes encodes tokens independently of the package's fast path.
func leBytes(tokens []uint32, mm ...uint64) []byte {
	var b []byte
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, t)
	}
	for _, m := range mm {
		b = binary.LittleEndian.AppendUint64(b, m)
	}
	return b
}

func TestHashBlocks(t *testing.T) {
	tokens := []uint32{10, 11, 12, 13, 14}
	cases := []struct {
		name      string
		blockSize int
		opt       Options
		want      []uint64
	}{
		{"complete blocks only", 2, Options{}, []uint64{
			xxh3.HashSeed(leBytes(tokens[0:2]), 1337),
			xxh3.HashSeed(leBytes(tokens[2:4]), 1337),
		}},
		{"block size 0 gives no blocks", 0, Options{}, nil},
		{"fewer tokens than a block", 8, Options{}, nil},
		{"eagle windows of bs+1, stride bs", 2, Options{Eagle: true}, []uint64{
			xxh3.HashSeed(leBytes(tokens[0:3]), 1337),
			xxh3.HashSeed(leBytes(tokens[2:5]), 1337),
		}},
		{"namespace seed", 2, Options{Seed: 99}, []uint64{
			xxh3.HashSeed(leBytes(tokens[0:2]), 99),
			xxh3.HashSeed(leBytes(tokens[2:4]), 99),
		}},
		{"mm hashes sorted and appended", 2, Options{MM: func(i int) []uint64 {
			if i == 1 {
				return []uint64{9, 3}
			}
			return nil
		}}, []uint64{
			xxh3.HashSeed(leBytes(tokens[0:2]), 1337),
			xxh3.HashSeed(leBytes(tokens[2:4], 3, 9), 1337),
		}},
	}
	var h Hasher
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := h.Hash(nil, tokens, c.blockSize, c.opt)
			if len(got) != len(c.want) {
				t.Fatalf("got %d blocks %v, want %d %v", len(got), got, len(c.want), c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("block %d: %#x, want %#x", i, got[i], c.want[i])
				}
			}
		})
	}
}

// TestDefaultSeedGolden pins one value of the default scheme: Dynamo's
// compute_block_hash over the same tokens must give it too.
func TestDefaultSeedGolden(t *testing.T) {
	var h Hasher
	got := h.Hash(nil, []uint32{1, 2, 3, 4}, 4, Options{})
	want := xxh3.HashSeed([]byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0}, 1337)
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %v, want [%d]", got, want)
	}
}

func TestCompleteBlocks(t *testing.T) {
	for _, c := range []struct {
		n, bs int
		eagle bool
		want  int
	}{
		{0, 16, false, 0}, {15, 16, false, 0}, {16, 16, false, 1}, {33, 16, false, 2},
		{16, 16, true, 0}, {17, 16, true, 1}, {33, 16, true, 2}, {5, 0, false, 0}, {5, -1, true, 0},
	} {
		if got := CompleteBlocks(c.n, c.bs, c.eagle); got != c.want {
			t.Errorf("CompleteBlocks(%d, %d, %v) = %d, want %d", c.n, c.bs, c.eagle, got, c.want)
		}
	}
}

func TestNamespaceSeed(t *testing.T) {
	if NamespaceSeed("", "") != DefaultSeed {
		t.Fatal("empty namespace must be the default seed")
	}
	seen := map[Seed]string{DefaultSeed: "default"}
	for _, ns := range [][2]string{{"a", ""}, {"", "a"}, {"ab", "c"}, {"a", "bc"}, {"lora", "salt"}} {
		s := NamespaceSeed(ns[0], ns[1])
		if prev, dup := seen[s]; dup {
			t.Errorf("namespace %q collides with %s", ns, prev)
		}
		seen[s] = ns[0] + "/" + ns[1]
		if NamespaceSeed(ns[0], ns[1]) != s {
			t.Errorf("namespace %q is not deterministic", ns)
		}
	}
}

func TestSequence(t *testing.T) {
	local := []uint64{5, 6, 7}
	got := Sequence(nil, local)
	pair := func(a, b uint64) uint64 {
		return xxh3.HashSeed(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, a), b), 1337)
	}
	s1 := pair(5, 6)
	want := []uint64{5, s1, pair(s1, 7)}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("seq[%d] = %d, want %d", i, got[i], want[i])
		}
	}
	// A prefix has the same sequence hashes as the whole.
	if p := Sequence([]uint64{42}, local[:2]); p[1] != 5 || p[2] != s1 {
		t.Fatalf("appending to dst changed the result: %v", p)
	}
}

func BenchmarkHash16TokenBlocks(b *testing.B) {
	tokens := make([]uint32, 16*32)
	for i := range tokens {
		tokens[i] = uint32(i * 31)
	}
	var h Hasher
	dst := make([]uint64, 0, 32)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		dst = h.Hash(dst[:0], tokens, 16, Options{})
	}
	b.ReportMetric(float64(b.N*32)/b.Elapsed().Seconds(), "blocks/s")
}
