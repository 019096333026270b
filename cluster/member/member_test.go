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
