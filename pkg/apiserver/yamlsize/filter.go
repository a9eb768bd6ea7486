package yamlsize

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
)

// WithLimit refuses, before any decoder sees it, a YAML request body (application/yaml, or a media type
// ending in +yaml such as server-side apply's application/apply-patch+yaml) whose aliases expand it past
// expandedLimit (see Size): 413 for a body too large once expanded, 400 for one that cannot be parsed
// or whose alias contains itself. Every other request, and a body over bodyLimit (which the handler
// refuses itself), passes through unread. A body without '*' has no alias and is not parsed.
func WithLimit(next http.Handler, bodyLimit, expandedLimit int64, serializer runtime.NegotiatedSerializer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Body == nil || req.Method == http.MethodGet || !isYAML(req.Header.Get("Content-Type")) {
			next.ServeHTTP(w, req)
			return
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, bodyLimit+1))
		if err != nil {
			responsewriters.ErrorNegotiated(apierrors.NewBadRequest("reading the request body: "+err.Error()), serializer, schema.GroupVersion{}, w, req)
			return
		}
		req.Body = readCloser{io.MultiReader(bytes.NewReader(body), req.Body), req.Body}
		if int64(len(body)) > bodyLimit || bytes.IndexByte(body, '*') < 0 {
			next.ServeHTTP(w, req)
			return
		}
		if _, err := Size(body, expandedLimit); err != nil {
			var status error
			if errors.Is(err, ErrTooLarge) {
				status = apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
					"the YAML body's aliases make it too large: %v; send it with fewer aliases, or as JSON", err))
			} else {
				status = apierrors.NewBadRequest("the YAML body cannot be read: " + err.Error())
			}
			responsewriters.ErrorNegotiated(status, serializer, schema.GroupVersion{}, w, req)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// isYAML says whether a Content-Type is a YAML one.
func isYAML(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(contentType))
	}
	return strings.HasSuffix(mt, "/yaml") || strings.HasSuffix(mt, "+yaml") || strings.HasSuffix(mt, "/x-yaml")
}

type readCloser struct {
	io.Reader
	io.Closer
}
