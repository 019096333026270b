package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/listener"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/engine"
)

func TestParseWorker(t *testing.T) {
	cfg, err := parseWorker("7:2=tcp://10.0.0.5:5557,replay=tcp://10.0.0.5:5558,engine=sglang,topic=kv@,bind,by-topic")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Stream.Worker != 7 || cfg.Stream.DpRank != 2 || cfg.Endpoint != "tcp://10.0.0.5:5557" ||
		cfg.ReplayEndpoint != "tcp://10.0.0.5:5558" || cfg.Engine != "sglang" || cfg.Topic != "kv@" || !cfg.Bind || !cfg.TopicIdentity {
		t.Errorf("parsed %+v", cfg)
	}
	shared, err := parseWorker("999=tcp://*:5556,bind,by-topic,pod=10.0.0.5:8000=11,pod=10.0.0.6:8000=12")
	if err != nil || len(shared.Pods) != 2 || shared.Pods["10.0.0.5:8000"] != 11 || shared.Pods["10.0.0.6:8000"] != 12 {
		t.Errorf("pod=: %+v, %v", shared, err)
	}
	own, err := parseWorker("8=tcp://*:5556,bind,by-topic,pod=10.0.0.5:8000")
	if err != nil || len(own.Pods) != 1 || own.Pods["10.0.0.5:8000"] != 8 {
		t.Errorf("pod=POD (the --worker's own ID): %+v, %v", own, err)
	}
	spec, err := parseWorker("3=tcp://10.0.0.5:5557,serving=http://10.0.0.5:8000")
	if err != nil || spec.ServingEndpoint != "http://10.0.0.5:8000" {
		t.Errorf("serving=: %+v, %v", spec, err)
	}
	spec, err = parseWorker("4=tcp://10.0.0.6:5557,serving=10.0.0.6:8000,role=prefill,bootstrap=8998")
	if err != nil || spec.Role != "prefill" || spec.BootstrapHost != "" || spec.BootstrapPort != 8998 {
		t.Errorf("role=prefill,bootstrap=8998: %+v, %v", spec, err)
	}
	spec, err = parseWorker("5=tcp://10.0.0.7:5557,role=prefill-decode,bootstrap=10.1.0.7:9000")
	if err != nil || spec.Role != "" || spec.BootstrapHost != "10.1.0.7" || spec.BootstrapPort != 9000 {
		t.Errorf("role=prefill-decode,bootstrap=HOST:PORT: %+v, %v", spec, err)
	}
	regs, err := registrations(workerFlags{spec}, "m", "t")
	if err != nil || regs[0].BootstrapPort != 9000 || regs[0].BootstrapHost != "10.1.0.7" {
		t.Errorf("registration %+v, %v", regs, err)
	}
	for _, bad := range []string{"tcp://x:1", "x=tcp://a:1", "1:y=tcp://a:1", "1=a:1", "1=tcp://a:1,color=red", "-1=tcp://a:1",
		"1=tcp://a:1,serving=a", "1=tcp://a:1,serving=tcp://a:1", "1=tcp://a:1,role=encode", "1=tcp://a:1,bootstrap=0",
		"1=tcp://a:1,bootstrap=h:70000", "1=tcp://a:1,bootstrap=a/b:1",
		"1=tcp://a:1,bind,pod=a:1=2", "1=tcp://a:1,bind,by-topic,pod==2", "1=tcp://a:1,bind,by-topic,pod=a=x"} {
		if _, err := parseWorker(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// kvrouter tap with its built-in simulated engines ends by checking that the
// index equals every engine's cache.
func TestTapSimulatedEnginesMatchTheIndex(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"tap", "--sim", "3", "--trace", "", "--requests", "300", "--rate", "0", "--block-size", "4"},
		nil, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "the index equals every engine's cache") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
}

func TestTapUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"tap", "--help"}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "--worker ID") {
		t.Errorf("tap --help: %d %s", code, out.String())
	}
	if code := run([]string{"tap", "--worker", "bogus"}, nil, &out, &errb); code != 2 {
		t.Errorf("bad --worker: exit %d", code)
	}
}

// tap --help names every engine choice (auto and each registered engine)
// in --worker's engine=.
func TestTapUsageListsTheEngines(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"tap", "--help"}, nil, &out, &errb); code != 0 {
		t.Fatalf("tap --help: exit %d: %s", code, errb.String())
	}
	want := "engine=" + strings.Join(engine.Choices(), "|") + "]"
	if len(engine.Names()) < 3 || !strings.Contains(out.String(), want) {
		t.Errorf("tap --help does not list the engines %v as %q:\n%s", engine.Choices(), want, out.String())
	}
}

// A socket shared by topic is shown pod by pod, with its refusals.
func TestSharedSocketStatus(t *testing.T) {
	ls := &listener.Stats{BadFrames: map[string]uint64{"too_many_streams": 3},
		Topics: []listener.TopicStream{{Pod: "10.0.0.5:8000", Stream: messages.StreamID{Worker: 11}, NextSeq: 9, Received: 9, Resyncs: 1}}}
	var out bytes.Buffer
	writeSharedStatus(&out, "tcp://*:5556", ls, func(s messages.StreamID) any { return "exact" },
		func(id messages.WorkerID) int { return int(id) * 2 })
	want := "shared socket tcp://*:5556: 1 pods, refused: topic_identity 0, too_many_streams 3, topic_worker_collision 0\n" +
		"  pod 10.0.0.5:8000: worker 11 rank 0: exact    seq 9       batches 9       blocks 22     gaps 0 resyncs 1\n"
	if out.String() != want {
		t.Errorf("got\n%q\nwant\n%q", out.String(), want)
	}
}
