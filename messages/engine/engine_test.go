package engine

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/kvrouter/kvrouter/messages/wire"
	"github.com/kvrouter/kvrouter/messages/wire/wirefix"
)

func seq8(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func TestParseReplayFrames(t *testing.T) {
	ff := bytes.Repeat([]byte{0xff}, 8)
	cases := []struct {
		name    string
		frames  [][]byte
		want    ReplayReply
		wantErr bool
	}{
		{"vllm 0.26 layout", [][]byte{{}, []byte("kv@p@m"), seq8(7), []byte{0x93}}, ReplayReply{Topic: []byte("kv@p@m"), Seq: 7, Payload: []byte{0x93}}, false},
		{"vllm 0.26 end marker", [][]byte{{}, {}, ff, {}}, ReplayReply{End: true}, false},
		{"3-frame layout", [][]byte{{}, seq8(1 << 40), []byte{0x92}}, ReplayReply{Seq: 1 << 40, Payload: []byte{0x92}}, false},
		{"3-frame end marker", [][]byte{{}, ff, {}}, ReplayReply{End: true}, false},
		{"all-ff seq with payload still ends", [][]byte{{}, ff, []byte{1}}, ReplayReply{End: true}, false},
		{"empty payload ends", [][]byte{{}, seq8(3), {}}, ReplayReply{End: true}, false},
		{"no delimiter", [][]byte{seq8(2), []byte{0x90}}, ReplayReply{Seq: 2, Payload: []byte{0x90}}, false},
		{"short seq", [][]byte{{}, []byte{1, 2}, []byte{0x90}}, ReplayReply{}, true},
		{"one frame", [][]byte{{}, seq8(1)}, ReplayReply{}, true},
		{"too many frames", [][]byte{{}, {}, {}, {}, {}}, ReplayReply{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseReplayFrames(c.frames)
			if (err != nil) != c.wantErr {
				t.Fatalf("err %v, wantErr %v", err, c.wantErr)
			}
			if err == nil && (got.End != c.want.End || got.Seq != c.want.Seq ||
				!bytes.Equal(got.Topic, c.want.Topic) || !bytes.Equal(got.Payload, c.want.Payload)) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestReplayRequest(t *testing.T) {
	f := ReplayRequest(258)
	if len(f) != 2 || len(f[0]) != 0 || !bytes.Equal(f[1], []byte{0, 0, 0, 0, 0, 0, 1, 2}) {
		t.Fatalf("got %v", f)
	}
}

func TestParseKVTopic(t *testing.T) {
	for _, c := range []struct {
		in       string
		ok       bool
		pod, mdl string
	}{
		{"kv@pod-1@meta-llama/Llama-3-8B", true, "pod-1", "meta-llama/Llama-3-8B"},
		{"kv@pod@model@with@ats", true, "pod", "model@with@ats"},
		{"kv@pod", false, "", ""},
		{"kv@@model", false, "", ""},
		{"", false, "", ""},
		{"other@pod@model", false, "", ""},
	} {
		got, ok := ParseKVTopic([]byte(c.in))
		if ok != c.ok || got.Pod != c.pod || got.Model != c.mdl {
			t.Errorf("%q: %+v %v", c.in, got, ok)
		}
	}
}

func TestRegistry(t *testing.T) {
	for _, name := range []string{"vllm", "sglang", "trtllm"} {
		a, err := Lookup(name)
		if err != nil || a.Name() != name {
			t.Fatalf("%s: %v", name, err)
		}
		// Every adapter decodes the common encoding.
		payload := wirefix.New().Batch(1, 1).Array(1).Str("AllBlocksCleared").Nil().Bytes()
		b, err := a.NewDecoder(wire.Limits{}).Decode(payload)
		if err != nil || len(b.Events) != 1 {
			t.Errorf("%s decode: %v", name, err)
		}
	}
	if _, err := Lookup("nope"); err == nil {
		t.Error("unknown engine accepted")
	}
	if a, _ := Lookup("trtllm"); a.Stream().SeqStartsAtZero || !a.Stream().SeqStartDetected {
		t.Error("trtllm's seqs start at 0 (its own publisher) or at a timestamp (Dynamo's): read from the first seq")
	}
	if a, _ := Lookup("vllm"); !a.Stream().SeqStartsAtZero {
		t.Error("vllm starts at 0")
	}
	defer func() {
		if recover() == nil {
			t.Error("duplicate registration must panic")
		}
	}()
	Register(Family{Key: "vllm"})
}
