package engine

import "bytes"

// Topic is what a topic convention names.
type Topic struct {
	Pod   string
	Model string
}

// ParseKVTopic parses the `kv@<pod>@<model>` convention (llm-d and others).
// The model may itself contain '@'; the pod may not be empty.
func ParseKVTopic(topic []byte) (Topic, bool) {
	rest, ok := bytes.CutPrefix(topic, []byte("kv@"))
	if !ok {
		return Topic{}, false
	}
	pod, model, ok := bytes.Cut(rest, []byte("@"))
	if !ok || len(pod) == 0 {
		return Topic{}, false
	}
	return Topic{Pod: string(pod), Model: string(model)}, true
}
