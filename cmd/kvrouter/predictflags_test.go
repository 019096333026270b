package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/kvrouter/kvrouter/actors/routing"
)

// A predicted-wait falloff that is negative or not finite is refused at
// start, naming the flag; --help says what it and --predict-wait-check do.
func TestPredictWaitFalloffFlag(t *testing.T) {
	for _, v := range []string{"-1", "+Inf", "NaN"} {
		var out, errb bytes.Buffer
		args := []string{"serve", "--predict-wait-falloff", v}
		if code := run(args, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--predict-wait-falloff") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "--help"}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "-predict-wait-falloff") ||
		!strings.Contains(out.String(), "a large fleet spreads a burst") || !strings.Contains(out.String(), "-predict-wait-check") {
		t.Errorf("serve --help says nothing of the predicted-wait falloff or check:\n%s", out.String())
	}
}

// --predict-wait-check sets the routing config's check only when given:
// the cost's default otherwise (off with --cost dynamo's config).
func TestPredictWaitCheckFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		base routing.Config
		want bool
	}{
		{nil, routing.DefaultConfig(), routing.DefaultPredictedWaitCheck},
		{nil, routing.DynamoConfig(), false},
		{[]string{"--predict-wait-check=false"}, routing.DefaultConfig(), false},
		{[]string{"--predict-wait-check"}, routing.DynamoConfig(), true},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		f := addPredictFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		rc := tc.base
		if err := f.routing(fs, &rc); err != nil || rc.PredictedWaitCheck != tc.want {
			t.Errorf("%v on %v: check %v, %v; want %v", tc.args, rc.Cost, rc.PredictedWaitCheck, err, tc.want)
		}
	}
}
