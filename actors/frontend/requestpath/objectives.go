package requestpath

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
)

// MaxObjectives bounds the objectives one file may name.
const MaxObjectives = 4096

// poolName is a reference to an InferencePool, by name.
type poolName struct {
	Name string `json:"name"`
}

// inferenceObjective is the part of an InferenceObjective flow control
// reads: its name (the x-gateway-inference-objective value), its priority
// and the pools it applies to — spec.poolRef (one pool) or spec.poolRefs
// (several), as the API's versions spell it (the Gateway API Inference
// Extension's inference.networking.x-k8s.io, llm-d's llm-d.ai; the group
// is not checked). Other fields are ignored, as kubectl's output carries
// many.
type inferenceObjective struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Priority *float64   `json:"priority"`
		PoolRef  poolName   `json:"poolRef"`
		PoolRefs []poolName `json:"poolRefs"`
	} `json:"spec"`
	Items []inferenceObjective `json:"items"` // a List
}

// appliesTo reports whether the objective applies to pool: it names no
// pool (an objective selecting pools by label, which a file cannot
// evaluate, counts as applying), or names this one.
func (o inferenceObjective) appliesTo(pool string) bool {
	refs := o.Spec.PoolRefs
	if o.Spec.PoolRef.Name != "" {
		refs = append(refs, o.Spec.PoolRef)
	}
	if len(refs) == 0 {
		return true
	}
	for _, r := range refs {
		if r.Name == pool {
			return true
		}
	}
	return false
}

// ParseObjectives reads InferenceObjectives as `kubectl get
// inferenceobjectives -o json` prints them — one object, or a List of
// them — into the map FlowConfig.Objectives takes: name → priority band
// (no priority: 0, as the extension defaults it). With pool set, an
// objective whose spec.poolRef / spec.poolRefs name only other pools is
// left out (skipped counts them). A name given twice, a priority that is not an integer,
// an item of another kind or more than MaxObjectives are errors.
func ParseObjectives(raw []byte, pool string) (bands map[string]int, skipped int, err error) {
	var doc inferenceObjective
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&doc); err != nil {
		return nil, 0, fmt.Errorf("inference objectives: %w", err)
	}
	items := []inferenceObjective{doc}
	if doc.Kind == "List" || doc.Kind == "InferenceObjectiveList" {
		items = doc.Items
	}
	if len(items) > MaxObjectives {
		return nil, 0, fmt.Errorf("inference objectives: %d objects, at most %d", len(items), MaxObjectives)
	}
	bands = map[string]int{}
	for i, it := range items {
		name := it.Metadata.Name
		switch {
		case it.Kind != "InferenceObjective":
			return nil, 0, fmt.Errorf("inference objectives: item %d is kind %q, want InferenceObjective", i, it.Kind)
		case name == "":
			return nil, 0, fmt.Errorf("inference objectives: item %d has no metadata.name", i)
		case pool != "" && !it.appliesTo(pool):
			skipped++
			continue
		}
		if _, dup := bands[name]; dup {
			return nil, 0, fmt.Errorf("inference objectives: %q given twice", name)
		}
		band := 0
		if p := it.Spec.Priority; p != nil {
			if *p != math.Trunc(*p) || math.Abs(*p) > math.MaxInt32 {
				return nil, 0, fmt.Errorf("inference objectives: %q: priority %v is not a 32-bit integer", name, *p)
			}
			band = int(*p)
		}
		bands[name] = band
	}
	return bands, skipped, nil
}

// maxObjectivesFile bounds the file LoadObjectives reads.
const maxObjectivesFile = 16 << 20

// LoadObjectives is ParseObjectives of a file (at most 16 MiB).
func LoadObjectives(path, pool string) (map[string]int, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxObjectivesFile+1))
	if err != nil {
		return nil, 0, err
	}
	if len(raw) > maxObjectivesFile {
		return nil, 0, fmt.Errorf("inference objectives %s: larger than %d bytes", path, maxObjectivesFile)
	}
	return ParseObjectives(raw, pool)
}
