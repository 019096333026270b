package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
	"github.com/kvrouter/kvrouter/messages/api"
)

// simFleetHelp is the part of kvrouter sim's help on --disagg-fleet.
const simFleetHelp = `
Disaggregated fleet: --disagg-fleet P:D starts P prefill and D decode engines in
this one process (their KV transfer is an in-memory medium, so both halves
of a pair must share a process), each with its own PUB, replay and OpenAI
surface on free ports of --fleet-host, speaking --disagg-protocol (vllm:
kv_transfer_params; sglang: bootstrap_host/port/room; trtllm:
disaggregated_params). A prefill engine refuses a leg that is not exactly
its protocol's prefill leg, a decode engine one that does not carry what
the prefill leg returned; refusals are 400s, counted at the end. The
fleet's registrations (role, serving endpoint, SGLang bootstrap address)
go to stdout as a workers file, ready for kvrouter serve --workers-file;
the fleet runs until interrupted. Nothing moves but token ids: no KV bytes,
no bootstrap server, no transfer time.

  kvrouter sim --disagg-fleet 1:2 --disagg-protocol sglang > fleet.json
  kvrouter serve --workers-file fleet.json --proxy-listen 127.0.0.1:8000
`

// pdFleet is a --disagg-fleet fleet's settings.
type pdFleet struct {
	prefill, decode int
	protocol        string
	host            string
	model           string
	blockSize       int
	capacity        int
	encoding        simengine.Encoding
	completion      int
	tokenInterval   time.Duration
}

// maxFleetEngines bounds --disagg-fleet (each engine holds three sockets).
const maxFleetEngines = 256

// sglangBootstrapPort is the first prefill engine's SGLang bootstrap port
// (SGLang's default, 8998); the next ones count up. Nothing listens there:
// the simulated engines only check their legs name it.
const sglangBootstrapPort = 8998

// parseFleet reads --disagg-fleet P:D.
func parseFleet(v string) (prefill, decode int, err error) {
	ps, ds, ok := strings.Cut(v, ":")
	p, perr := strconv.Atoi(ps)
	d, derr := strconv.Atoi(ds)
	if !ok || perr != nil || derr != nil || p < 1 || d < 1 || p+d > maxFleetEngines {
		return 0, 0, fmt.Errorf("--disagg-fleet %q: want P:D, at least one of each, at most %d engines", v, maxFleetEngines)
	}
	return p, d, nil
}

// checkFleetProtocol refuses a --disagg-protocol the simulated engines do
// not speak.
func checkFleetProtocol(protocol string) error {
	if !slices.Contains([]string{"vllm", "sglang", "trtllm"}, protocol) {
		return fmt.Errorf("--disagg-protocol %q: want vllm, sglang or trtllm", protocol)
	}
	return nil
}

// fleetEncoding is the KV-event encoding of a protocol's engines: the
// simulated engines publish vLLM's or SGLang's; TensorRT-LLM's fleet
// publishes vLLM's (the simulator has no TensorRT-LLM publisher), so its
// registrations leave the engine to detection.
func fleetEncoding(protocol string) (simengine.Encoding, string) {
	switch protocol {
	case "sglang":
		return simengine.EncodingSGLang, "sglang"
	case "trtllm":
		return simengine.EncodingVLLMMap, ""
	}
	return simengine.EncodingVLLMMap, "vllm"
}

// simFleetMain is kvrouter sim --disagg-fleet: the flags checked, the fleet run
// until SIGINT/SIGTERM.
func simFleetMain(fs *flag.FlagSet, f pdFleet, fleet string, enc simengine.Encoding, stdout io.Writer,
	fail func(int, string, ...any) int) int {
	var err error
	if f.prefill, f.decode, err = parseFleet(fleet); err != nil {
		return fail(2, "%v", err)
	}
	if err := checkFleetProtocol(f.protocol); err != nil {
		return fail(2, "%v", err)
	}
	if f.blockSize <= 0 || f.capacity <= 0 || f.completion <= 0 || f.tokenInterval < 0 {
		return fail(2, "--block-size, --capacity, --completion-tokens or --token-interval out of range")
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "encoding" {
			f.encoding = enc
		}
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runSimFleet(ctx, f, stdout, fs.Output()); err != nil {
		return fail(1, "%v", err)
	}
	return 0
}

// runSimFleet starts the fleet, writes its registrations to out, and
// serves until ctx ends; the transfer counts and refusals go to stderr.
func runSimFleet(ctx context.Context, f pdFleet, out, stderr io.Writer) error {
	tr := simengine.NewTransfer()
	enc, engineName := fleetEncoding(f.protocol)
	if f.encoding != "" {
		enc = f.encoding
	}
	var regs []api.Registration
	for i := range f.prefill + f.decode {
		role := simengine.RolePrefill
		if i >= f.prefill {
			role = simengine.RoleDecode
		}
		eng, err := simengine.New(simengine.Options{Endpoint: "tcp://" + net.JoinHostPort(f.host, "0"),
			ReplayEndpoint: "tcp://" + net.JoinHostPort(f.host, "0"), BlockSize: f.blockSize, CapacityBlocks: f.capacity,
			Encoding: enc, Linger: 200 * time.Millisecond})
		if err != nil {
			return err
		}
		defer eng.Close()
		d := &simengine.DisaggOptions{Role: role, Protocol: f.protocol, Transfer: tr}
		reg := api.Registration{InstanceID: messages.WorkerID(i + 1), Endpoint: eng.Endpoint(), ReplayEndpoint: eng.ReplayEndpoint(),
			ModelName: f.model, BlockSize: uint32(f.blockSize), Engine: engineName, Role: role}
		if role == simengine.RolePrefill && f.protocol == "sglang" {
			d.BootstrapHost, d.BootstrapPort = f.host, uint16(sglangBootstrapPort+i)
			reg.BootstrapHost, reg.BootstrapPort = d.BootstrapHost, d.BootstrapPort
		}
		srv, err := eng.ServeHTTP(net.JoinHostPort(f.host, "0"), simengine.HTTPOptions{Model: f.model,
			CompletionTokens: f.completion, TokenInterval: f.tokenInterval, Disagg: d})
		if err != nil {
			return err
		}
		defer srv.Close()
		reg.ServingEndpoint = srv.ServingEndpoint()
		regs = append(regs, reg)
		fmt.Fprintf(stderr, "kvrouter sim: %s engine %d: events %s, OpenAI on http://%s\n", role, reg.InstanceID, eng.Endpoint(), reg.ServingEndpoint)
	}
	enc2 := json.NewEncoder(out)
	enc2.SetIndent("", "  ")
	if err := enc2.Encode(regs); err != nil {
		return err
	}
	if engineName == "" {
		fmt.Fprintf(stderr, "kvrouter sim: the %s fleet publishes vLLM-encoded events: run the proxy with --proxy-disagg-protocol %s\n", f.protocol, f.protocol)
	}
	fmt.Fprintf(stderr, "kvrouter sim: %d prefill and %d decode engines (%s); serving until interrupted\n", f.prefill, f.decode, f.protocol)
	<-ctx.Done()
	st := tr.Stats()
	fmt.Fprintf(stderr, "kvrouter sim: prefill legs %d, decode legs %d, local prefills on decode engines %d, refused %d\n",
		st.Prefills, st.Decodes, st.LocalDecodes, len(tr.Violations()))
	for _, v := range tr.Violations() {
		fmt.Fprintf(stderr, "kvrouter sim: refused: %s\n", v)
	}
	return nil
}
