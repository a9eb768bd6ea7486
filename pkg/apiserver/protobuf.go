package apiserver

import (
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"

	"github.com/rayctl/rayctl/pkg/apiserver/scheme"
)

// rejectCustomResourceProtobuf answers 415 to a custom-resource write sent as protobuf. Custom resources
// have no protobuf encoding; apiextensions-apiserver's strict decoder for that media type is missing
// and a create would otherwise panic in the handler.
func rejectCustomResourceProtobuf(next http.Handler, serializer runtime.NegotiatedSerializer) http.Handler {
	builtin := map[string]bool{"apiextensions.k8s.io": true}
	for _, gv := range scheme.GroupVersions {
		builtin[gv.Group] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && strings.HasPrefix(req.Header.Get("Content-Type"), runtime.ContentTypeProtobuf) {
			if rest, ok := strings.CutPrefix(req.URL.Path, "/apis/"); ok {
				group, _, _ := strings.Cut(rest, "/")
				if group != "" && !builtin[group] {
					err := apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, req.Method,
						schema.GroupResource{Group: group}, "", "custom resources accept JSON and YAML, not "+runtime.ContentTypeProtobuf, 0, false)
					responsewriters.ErrorNegotiated(err, serializer, schema.GroupVersion{Group: group}, w, req)
					return
				}
			}
		}
		next.ServeHTTP(w, req)
	})
}
