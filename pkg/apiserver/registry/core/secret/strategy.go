package secret

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// mergeStringData folds stringData into data (stringData wins) and clears it: stringData is a
// write-only convenience, never stored, as on a real cluster.
func mergeStringData(ctx context.Context, obj runtime.Object) {
	s := obj.(*corev1.Secret)
	if len(s.StringData) == 0 {
		s.StringData = nil
		return
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}
