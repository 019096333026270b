package routing

import (
	"errors"
	"testing"
	"time"
)

// Output blocks grow a request's blocks on its rank; a decay fraction
// re-weights all of them; Free drops what the request counts at that time.
func TestLoadAddOutputBlock(t *testing.T) {
	A := wk(1, 0)
	l := NewLoad(LoadConfig{})
	if err := l.Add("r1", A, 100, 8, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.Add("r2", A, 10, 2, t0); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name      string
		id        string
		decay     float64
		wantDelta int64
		want      RankLoad
	}{
		{"r1 +1", "r1", NoDecay, 1, RankLoad{A, 110, 11, 2, 0}},
		{"r1 +1", "r1", NoDecay, 1, RankLoad{A, 110, 12, 2, 0}},
		{"r1 +1 at half weight: 11 held count 6 (round 5.5 up)", "r1", 0.5, -4, RankLoad{A, 110, 8, 2, 0}},
		{"r1 +1 in full after the decay", "r1", NoDecay, 1, RankLoad{A, 110, 9, 2, 0}},
		{"r2 +1 at weight 0", "r2", 0, -2, RankLoad{A, 110, 7, 2, 0}},
		{"r1 +1 at weight 1: every held block counts again", "r1", 1, 6, RankLoad{A, 110, 13, 2, 0}},
	}
	for _, s := range steps {
		got, err := l.AddOutputBlock(s.id, s.decay, t0)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got.Key != A || got.Blocks != s.wantDelta {
			t.Errorf("%s: delta %+v, want %d on %v", s.name, got, s.wantDelta, A)
		}
		if got := l.Of(A); got != s.want {
			t.Fatalf("%s: load %+v, want %+v", s.name, got, s.want)
		}
	}
	if err := l.Free("r1"); err != nil {
		t.Fatal(err)
	}
	if got, want := l.Of(A), (RankLoad{A, 10, 0, 1, 0}); got != want {
		t.Errorf("after free r1: %+v, want %+v", got, want)
	}
	if _, err := l.AddOutputBlock("r1", NoDecay, t0); !errors.Is(err, ErrUnknownRequest) {
		t.Errorf("freed request: %v", err)
	}
	if _, err := l.AddOutputBlock("r2", 1.5, t0); !errors.Is(err, ErrInvalidLoad) {
		t.Errorf("decay 1.5: %v", err)
	}
	if st := l.Stats(); st.OutputBlocks != 6 || st.Unknown != 1 {
		t.Errorf("stats %+v", st)
	}
}

// An output block is decode progress: it moves a decoding request's
// deadline, so a long generation that keeps reporting is not expired.
func TestLoadOutputBlockExtendsDecodeDeadline(t *testing.T) {
	A := wk(1, 0)
	l := NewLoad(LoadConfig{DecodeTTL: time.Minute})
	if err := l.Add("r1", A, 10, 1, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.Add("r2", A, 10, 1, t0); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"r1", "r2"} {
		if err := l.PrefillDone(id, t0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.AddOutputBlock("r1", NoDecay, t0.Add(50*time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := l.Expire(t0.Add(time.Minute)); n != 1 {
		t.Fatalf("expired %d at one minute, want r2 only", n)
	}
	if _, _, ok := l.Phase("r1"); !ok {
		t.Error("r1 expired although it reported progress")
	}
	if n := l.Expire(t0.Add(110 * time.Second)); n != 1 {
		t.Errorf("expired %d at 110 s, want r1", n)
	}
}
