package service

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"

	"github.com/kvrouter/kvrouter/actors/routing/disagg"
	"github.com/kvrouter/kvrouter/messages/api"
	"github.com/kvrouter/kvrouter/messages/serving"
)

// Prefill/decode roles at the service's edges: registrations are checked
// and stored with their role (routing's candidates carry it), and a split
// /route answer names its prefill leg's serving and bootstrap addresses.

// withRoleChecked checks a registration's role and bootstrap host and
// stores the role in its canonical form ("" for both), whichever path
// the registration came by (HTTP, flags, a workers file, discovery, a
// cluster peer).
func withRoleChecked(reg *api.Registration) error {
	r, err := api.ParseRole(reg.Role)
	if err != nil {
		return api.Errorf(api.ErrInvalid, api.ReasonInvalidValue, "%v", err)
	}
	if err := api.CheckBootstrapHost(reg.BootstrapHost); err != nil {
		return api.Errorf(api.ErrInvalid, api.ReasonInvalidValue, "%v", err)
	}
	reg.Role = r
	return nil
}

// withRole fills a /workers rank's role and bootstrap address.
func withRole(ri *api.RankInfo, reg api.Registration) {
	ri.Role = api.RoleOf(reg.Role)
	ri.BootstrapHost, ri.BootstrapPort = bootstrapOf(reg)
}

// bootstrapOf is a registration's bootstrap address: its bootstrap host
// (the serving endpoint's host when it names none) and port; ("", 0)
// without a bootstrap port.
func bootstrapOf(reg api.Registration) (string, uint16) {
	if reg.BootstrapPort == 0 {
		return "", 0
	}
	host := reg.BootstrapHost
	if host == "" {
		if ep, err := serving.Parse(reg.ServingEndpoint); err == nil {
			host, _, _ = net.SplitHostPort(ep.HostPort)
		}
	}
	return host, reg.BootstrapPort
}

// fillPrefill adds the route actor's disaggregation outcome to a /route
// answer: why it split or not, and a split's prefill leg with the
// prefill worker's registered serving endpoint and bootstrap address.
// Nothing in a namespace without roles (o nil).
func (s *Service) fillPrefill(out *api.RouteResult, o *disagg.Outcome) {
	if o == nil {
		return
	}
	out.Disaggregation = &api.Disaggregation{Split: o.Split, Reason: o.Reason, Detail: o.Detail}
	s.disaggCounts.count(o.Reason)
	if !o.Split {
		return
	}
	out.PrefillWorker = s.prefillLeg(disagg.Choice{Key: o.Prefill, OverlapBlocks: o.OverlapBlocks, CachedTokens: o.CachedTokens})
	if o.HasAlternate {
		out.PrefillAlternate = s.prefillLeg(o.Alternate)
	}
}

// prefillLeg is a prefill worker's leg of a /route answer, with its
// registered serving endpoint and bootstrap address.
func (s *Service) prefillLeg(c disagg.Choice) *api.PrefillLeg {
	leg := &api.PrefillLeg{WorkerID: c.Key.Worker, DpRank: c.Key.DpRank, OverlapBlocks: c.OverlapBlocks, CachedTokens: uint64(c.CachedTokens)}
	s.mu.Lock()
	if w := s.workers[c.Key]; w != nil {
		leg.ServingEndpoint = w.reg.ServingEndpoint
		leg.BootstrapHost, leg.BootstrapPort = bootstrapOf(w.reg)
	}
	s.mu.Unlock()
	return leg
}

// disaggReasons are the Disaggregation.Reason values, in the order
// DisaggDecisions writes them.
var disaggReasons = [...]string{api.DisaggNoPrefillPool, api.DisaggNever, api.DisaggAlways,
	api.DisaggWarmDecode, api.DisaggShortUncached, api.DisaggUncached}

// disaggCounts counts decisions per reason (index in disaggReasons).
type disaggCounts [len(disaggReasons)]atomic.Int64

func (c *disaggCounts) count(reason string) {
	for i, r := range disaggReasons {
		if r == reason {
			c[i].Add(1)
			return
		}
	}
}

// DisaggDecisions writes kvrouter_disagg_decisions_total{reason,split}:
// the /route answers of namespaces with prefill/decode roles, by why they
// were split or not (every reason, zeros included, so a dashboard's
// rate() sees a series before its first decision).
func (s *Service) DisaggDecisions(w io.Writer) error {
	var b strings.Builder
	const name = "kvrouter_disagg_decisions_total"
	fmt.Fprintf(&b, "# HELP %s /route decisions of namespaces with prefill/decode roles, by reason (split: a remote prefill).\n# TYPE %s counter\n", name, name)
	for i, r := range disaggReasons {
		split := r == api.DisaggAlways || r == api.DisaggUncached
		fmt.Fprintf(&b, "%s{reason=%q,split=\"%t\"} %d\n", name, r, split, s.disaggCounts[i].Load())
	}
	_, err := io.WriteString(w, b.String())
	return err
}
