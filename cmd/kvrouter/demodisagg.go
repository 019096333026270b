package main

import (
	"fmt"
	"io"

	"github.com/kvrouter/kvrouter/actors/frontend/proxy"
	"github.com/kvrouter/kvrouter/actors/routing/disagg"
	"github.com/kvrouter/kvrouter/bench/simengine"
	"github.com/kvrouter/kvrouter/messages"
)

// demoDisaggHelp is the part of kvrouter demo's help on --disagg-fleet.
const demoDisaggHelp = `
With --disagg-fleet P:D the fleet is disaggregated: P prefill and D decode
engines (as kvrouter sim --disagg-fleet's) speaking --disagg-protocol,
registered with their roles, and the proxy splits requests the way kvrouter
serve's does: vLLM and TensorRT-LLM by the conditional rule (--disagg
auto: no remote prefill when the decode engine holds most of the prompt or
the uncached part is short), SGLang always (its decode engines cannot
prefill alone). Prefill engines refuse a leg that is not exactly their
protocol's, decode engines one that does not carry what the prefill leg
returned; the demo fails on any refusal. The random baseline then routes
over the decode engines alone, without a remote prefill. Nothing moves
but token ids: no KV bytes, no transfer time.
`

// demoPD is a disaggregated demo fleet's shape (--disagg-fleet P:D).
type demoPD struct {
	prefill, decode int
	protocol        string
	transfer        *simengine.Transfer
}

// parseDemoPD reads --disagg-fleet and --disagg-protocol: nil without a
// fleet.
func parseDemoPD(fleet, protocol string) (*demoPD, error) {
	if fleet == "" {
		return nil, nil
	}
	p, d, err := parseFleet(fleet)
	if err != nil {
		return nil, err
	}
	if err := checkFleetProtocol(protocol); err != nil {
		return nil, err
	}
	return &demoPD{prefill: p, decode: d, protocol: protocol, transfer: simengine.NewTransfer()}, nil
}

// engines is the fleet's size.
func (pd *demoPD) engines() int { return pd.prefill + pd.decode }

// routing is the split rule: SGLang's decode engines need a prefill leg
// for every request.
func (pd *demoPD) routing() disagg.Config {
	c := disagg.DefaultConfig()
	if pd.protocol == "sglang" {
		c.Mode = disagg.ModeAlways
	}
	return c
}

// proxy is the proxy's split-request options: the protocol explicit for
// TensorRT-LLM, whose simulated engines publish vLLM-encoded events.
func (pd *demoPD) proxy(engines func(messages.WorkerID) string) proxy.DisaggOptions {
	proto := proxy.ProtocolAuto
	if pd.protocol == "trtllm" {
		proto = pd.protocol
	}
	return proxy.DisaggOptions{Protocol: proto, Engines: engines, PrefillRetries: proxy.MaxPrefillRetries}
}

// engine is engine i's role options, KV-event encoding and the fields its
// registration adds.
func (pd *demoPD) engine(i int) (*simengine.DisaggOptions, simengine.Encoding, map[string]any) {
	enc, name := fleetEncoding(pd.protocol)
	d := &simengine.DisaggOptions{Role: simengine.RoleDecode, Protocol: pd.protocol, Transfer: pd.transfer}
	if i < pd.prefill {
		d.Role = simengine.RolePrefill
	}
	reg := map[string]any{"role": d.Role}
	if name != "" {
		reg["engine"] = name
	}
	if d.Role == simengine.RolePrefill && pd.protocol == "sglang" {
		d.BootstrapHost, d.BootstrapPort = "127.0.0.1", uint16(sglangBootstrapPort+i)
		reg["bootstrap_host"], reg["bootstrap_port"] = d.BootstrapHost, d.BootstrapPort
	}
	return d, enc, reg
}

// report prints what the engines saw of the split requests and fails on
// a leg they refused.
func (pd *demoPD) report(stdout io.Writer) error {
	st := pd.transfer.Stats()
	fmt.Fprintf(stdout, "disaggregation (%s, %d prefill : %d decode engines): %d requests split (prefill leg, then decode leg), %d decode legs, %d served by their decode engine alone, %d legs refused\n",
		pd.protocol, pd.prefill, pd.decode, st.Prefills, st.Decodes, st.LocalDecodes, len(pd.transfer.Violations()))
	if v := pd.transfer.Violations(); len(v) > 0 {
		return fmt.Errorf("the engines refused %d legs, the first: %s", len(v), v[0])
	}
	return nil
}
