package requestpath

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

// A List as kubectl prints it: names to priority bands, no priority is 0,
// another pool's objectives are left out; bad documents are errors.
func TestParseObjectives(t *testing.T) {
	list := `{"apiVersion":"v1","kind":"List","items":[
	 {"apiVersion":"inference.networking.x-k8s.io/v1alpha2","kind":"InferenceObjective","metadata":{"name":"chat","namespace":"ns"},"spec":{"priority":10,"poolRef":{"name":"pool-a"}}},
	 {"kind":"InferenceObjective","metadata":{"name":"batch"},"spec":{"priority":-1,"poolRef":{"name":"pool-a"}}},
	 {"kind":"InferenceObjective","metadata":{"name":"plain"},"spec":{"poolRef":{"name":"pool-a"}}},
	 {"kind":"InferenceObjective","metadata":{"name":"other"},"spec":{"priority":99,"poolRef":{"name":"pool-b"}}},
	 {"apiVersion":"llm-d.ai/v1alpha2","kind":"InferenceObjective","metadata":{"name":"multi"},"spec":{"priority":4,"poolRefs":[{"name":"pool-c"},{"name":"pool-a"}]}},
	 {"kind":"InferenceObjective","metadata":{"name":"elsewhere"},"spec":{"priority":4,"poolRefs":[{"name":"pool-c"}]}},
	 {"kind":"InferenceObjective","metadata":{"name":"by-label"},"spec":{"priority":2,"poolSelector":{"matchLabels":{"tier":"gold"}}}}],"metadata":{}}`
	got, skipped, err := ParseObjectives([]byte(list), "pool-a")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"chat": 10, "batch": -1, "plain": 0, "multi": 4, "by-label": 2}; !maps.Equal(got, want) || skipped != 2 {
		t.Fatalf("got %v skipped %d, want %v skipped 2", got, skipped, want)
	}
	if got, _, _ := ParseObjectives([]byte(list), ""); len(got) != 7 || got["other"] != 99 {
		t.Fatalf("without a pool every objective counts: %v", got)
	}
	one := `{"kind":"InferenceObjective","metadata":{"name":"solo"},"spec":{"priority":3}}`
	if got, _, err := ParseObjectives([]byte(one), "pool-a"); err != nil || !maps.Equal(got, map[string]int{"solo": 3}) {
		t.Fatalf("one object: %v %v", got, err)
	}
	var many strings.Builder
	many.WriteString(`{"kind":"List","items":[`)
	for i := range MaxObjectives + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `{"kind":"InferenceObjective","metadata":{"name":"o%d"}}`, i)
	}
	many.WriteString("]}")
	for name, doc := range map[string]string{
		"not json":      `{"kind":`,
		"wrong kind":    `{"kind":"List","items":[{"kind":"InferencePool","metadata":{"name":"p"}}]}`,
		"no name":       `{"kind":"InferenceObjective","spec":{"priority":1}}`,
		"twice":         `{"kind":"List","items":[{"kind":"InferenceObjective","metadata":{"name":"a"}},{"kind":"InferenceObjective","metadata":{"name":"a"}}]}`,
		"fraction":      `{"kind":"InferenceObjective","metadata":{"name":"a"},"spec":{"priority":1.5}}`,
		"huge priority": `{"kind":"InferenceObjective","metadata":{"name":"a"},"spec":{"priority":1e12}}`,
		"string prio":   `{"kind":"InferenceObjective","metadata":{"name":"a"},"spec":{"priority":"high"}}`,
		"too many":      many.String(),
	} {
		if got, _, err := ParseObjectives([]byte(doc), ""); err == nil {
			t.Errorf("%s: no error (%v)", name, got)
		}
	}
}
