package member

import (
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
)

// TestStartRefusesBadConfig: a config that cannot work is refused with
// a reason before anything listens.
func TestStartRefusesBadConfig(t *testing.T) {
	cases := map[string]struct {
		cfg  Config
		want string
	}{
		"no name":          {Config{Provider: ProviderTest, TestAgent: test.NewInMemAgent()}, "name is empty"},
		"unknown provider": {Config{Name: "c", Provider: "consul"}, "unknown cluster provider"},
		"test, no agent":   {Config{Name: "c", Provider: ProviderTest}, "in-memory agent"},
		"etcd, no urls":    {Config{Name: "c", Provider: ProviderEtcd}, "--etcd-endpoints"},
		"automanaged":      {Config{Name: "c", Provider: ProviderAutomanaged}, "peers"},
		"bad bind":         {Config{Name: "c", Provider: ProviderTest, TestAgent: test.NewInMemAgent(), Bind: "nohostport"}, "cluster bind"},
		"bad advertise":    {Config{Name: "c", Provider: ProviderTest, TestAgent: test.NewInMemAgent(), Advertise: "x"}, "cluster advertise"},
	}
	for name, c := range cases {
		_, err := Start(actor.NewActorSystem(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one mentioning %q", name, err, c.want)
		}
	}
}

func TestCheckAdvertise(t *testing.T) {
	for _, c := range []struct {
		bind, advertise string
		ok              bool
	}{
		{"127.0.0.1:0", "", true},
		{"0.0.0.0:7000", "10.0.0.5:7000", true},
		{"0.0.0.0:7000", "lb.example:7443", true}, // NAT: a fixed port mapped elsewhere
		{"127.0.0.1:0", "127.0.0.1:7000", false},  // the silent cluster: nothing listens on 7000
		{"127.0.0.1:0", "127.0.0.1:0", false},
		{"127.0.0.1:7000", "no-port", false},
	} {
		err := CheckAdvertise(c.bind, c.advertise)
		if (err == nil) != c.ok {
			t.Errorf("CheckAdvertise(%q, %q) = %v, want ok %v", c.bind, c.advertise, err, c.ok)
		}
	}
}
