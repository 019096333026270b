// Package kubefake hands client-go's fake clientset to kube.Start, for
// tests. kube takes one namespace's pod client (kube.PodClient, which
// Pods satisfies); the fake clientset's own pod client does not say, as
// the clientset does, that its watches cannot stream the initial list, and
// the reflector would wait for an initial-events bookmark the fake never
// sends. Only tests import it; the router's binary does not link the fake
// clientset.
package kubefake

import (
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Pods is c's client of namespace's pods.
func Pods(c *fake.Clientset, namespace string) PodClient {
	return PodClient{c.CoreV1().Pods(namespace), c}
}

// PodClient is the fake clientset's pod client, saying what the clientset
// says of the streaming list.
type PodClient struct {
	corev1client.PodInterface
	c *fake.Clientset
}

// IsWatchListSemanticsUnSupported is the reflector's question, answered by
// the fake clientset.
func (p PodClient) IsWatchListSemanticsUnSupported() bool {
	return p.c.IsWatchListSemanticsUnSupported()
}
