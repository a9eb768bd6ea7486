package pod

import (
	"fmt"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
)

// addQueryConversions teaches s to decode the query parameters of pods/log, pods/exec, pods/portforward
// and pods/proxy into their
// options, as the conversions generated for Kubernetes' own core/v1 package do: the generic API server
// reads a GetterWithOptions' or Connecter's options through the scheme's parameter codec.
func addQueryConversions(s *runtime.Scheme) error {
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.PodLogOptions)(nil), func(a, b any, _ conversion.Scope) error {
		return queryToPodLogOptions(*a.(*url.Values), b.(*corev1.PodLogOptions))
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.PodExecOptions)(nil), func(a, b any, _ conversion.Scope) error {
		return queryToPodExecOptions(*a.(*url.Values), b.(*corev1.PodExecOptions))
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*url.Values)(nil), (*corev1.PodPortForwardOptions)(nil), func(a, b any, _ conversion.Scope) error {
		return queryToPodPortForwardOptions(*a.(*url.Values), b.(*corev1.PodPortForwardOptions))
	}); err != nil {
		return err
	}
	return s.AddConversionFunc((*url.Values)(nil), (*corev1.PodProxyOptions)(nil), func(a, b any, _ conversion.Scope) error {
		return param(*a.(*url.Values), "path", &b.(*corev1.PodProxyOptions).Path, runtime.Convert_Slice_string_To_string)
	})
}

// queryToPodPortForwardOptions decodes pods/portforward's query parameters; port repeats, one per port
// (kubectl names its ports in stream headers instead, and sends none).
func queryToPodPortForwardOptions(q url.Values, out *corev1.PodPortForwardOptions) error {
	out.Ports = nil
	for _, v := range q["ports"] {
		p, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("query parameter ports: %q is not a port number", v)
		}
		out.Ports = append(out.Ports, int32(p))
	}
	return nil
}

// queryToPodLogOptions decodes pods/log's query parameters.
func queryToPodLogOptions(q url.Values, out *corev1.PodLogOptions) error {
	return firstError(
		param(q, "container", &out.Container, runtime.Convert_Slice_string_To_string),
		param(q, "follow", &out.Follow, runtime.Convert_Slice_string_To_bool),
		param(q, "previous", &out.Previous, runtime.Convert_Slice_string_To_bool),
		param(q, "sinceSeconds", &out.SinceSeconds, runtime.Convert_Slice_string_To_Pointer_int64),
		param(q, "sinceTime", &out.SinceTime, metav1.Convert_Slice_string_To_Pointer_v1_Time),
		param(q, "timestamps", &out.Timestamps, runtime.Convert_Slice_string_To_bool),
		param(q, "tailLines", &out.TailLines, runtime.Convert_Slice_string_To_Pointer_int64),
		param(q, "limitBytes", &out.LimitBytes, runtime.Convert_Slice_string_To_Pointer_int64),
		param(q, "insecureSkipTLSVerifyBackend", &out.InsecureSkipTLSVerifyBackend, runtime.Convert_Slice_string_To_bool),
		param(q, "stream", &out.Stream, convertToPointerString),
	)
}

// queryToPodExecOptions decodes pods/exec's query parameters; command repeats, one per argument.
func queryToPodExecOptions(q url.Values, out *corev1.PodExecOptions) error {
	out.Command = append([]string(nil), q["command"]...)
	return firstError(
		param(q, "stdin", &out.Stdin, runtime.Convert_Slice_string_To_bool),
		param(q, "stdout", &out.Stdout, runtime.Convert_Slice_string_To_bool),
		param(q, "stderr", &out.Stderr, runtime.Convert_Slice_string_To_bool),
		param(q, "tty", &out.TTY, runtime.Convert_Slice_string_To_bool),
		param(q, "container", &out.Container, runtime.Convert_Slice_string_To_string),
	)
}

// param decodes q[key], when given, into out with convert.
func param[T any](q url.Values, key string, out *T, convert func(*[]string, *T, conversion.Scope) error) error {
	values, ok := q[key]
	if !ok || len(values) == 0 {
		return nil
	}
	if err := convert(&values, out, nil); err != nil {
		return fmt.Errorf("query parameter %s: %w", key, err)
	}
	return nil
}

func convertToPointerString(in *[]string, out **string, _ conversion.Scope) error {
	s := (*in)[0]
	*out = &s
	return nil
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
