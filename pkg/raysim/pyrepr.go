package raysim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/rayctl/rayctl/pkg/raysim/jobs"
)

// pyJobList prints jobs as Ray's `ray job list` does: Python's pretty-printed list of JobDetails
// reprs, one job a line.
func pyJobList(list []jobs.Details) string {
	items := make([]string, len(list))
	for i, d := range list {
		items[i] = pyJobDetails(d)
	}
	return "[" + strings.Join(items, ",\n ") + "]"
}

// pyJobDetails is the repr of one of Ray's JobDetails, fields in Ray's order.
func pyJobDetails(d jobs.Details) string {
	var info any
	if d.DriverInfo != nil {
		info = fmt.Sprintf("DriverInfo(id=%s, node_ip_address=%s, pid=%s)", pyStr(d.DriverInfo.ID), pyStr(d.DriverInfo.NodeIPAddr), pyStr(d.DriverInfo.PID))
	}
	var metadata any
	if d.Metadata != nil {
		m := make(map[string]any, len(d.Metadata))
		for k, v := range d.Metadata {
			m[k] = v
		}
		metadata = m
	}
	var runtimeEnv any
	if d.RuntimeEnv != nil {
		runtimeEnv = d.RuntimeEnv
	}
	fields := []struct {
		name string
		val  any
	}{
		{"type", pyRaw(fmt.Sprintf("<JobType.%s: '%s'>", d.Type, d.Type))},
		{"job_id", optional(d.JobID)},
		{"submission_id", optional(d.SubmissionID)},
		{"driver_info", pyRawOrNil(info)},
		{"status", pyRaw(fmt.Sprintf("<JobStatus.%s: '%s'>", d.Status, d.Status))},
		{"entrypoint", d.Entrypoint},
		{"message", optional(d.Message)},
		{"error_type", optional(d.ErrorType)},
		{"start_time", optional(d.StartTime)},
		{"end_time", optional(d.EndTime)},
		{"metadata", metadata},
		{"runtime_env", runtimeEnv},
		{"driver_agent_http_address", optional(d.DriverAgentHTTPAddress)},
		{"driver_node_id", optional(d.DriverNodeID)},
		{"driver_exit_code", optional(d.DriverExitCode)},
	}
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = f.name + "=" + pyRepr(f.val)
	}
	return "JobDetails(" + strings.Join(parts, ", ") + ")"
}

// pyRaw is text printed as it is.
type pyRaw string

func pyRawOrNil(v any) any {
	if s, ok := v.(string); ok {
		return pyRaw(s)
	}
	return nil
}

// optional is *p, or nil (None) when p is nil.
func optional[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// pyRepr prints v as Python's repr prints the same value decoded from JSON.
func pyRepr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case pyRaw:
		return string(x)
	case string:
		return pyStr(x)
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []any:
		items := make([]string, len(x))
		for i, e := range x {
			items[i] = pyRepr(e)
		}
		return "[" + strings.Join(items, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		items := make([]string, len(keys))
		for i, k := range keys {
			items[i] = pyStr(k) + ": " + pyRepr(x[k])
		}
		return "{" + strings.Join(items, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// pyStr is Python's repr of a string: single quotes unless it holds a single quote and no double one.
func pyStr(s string) string {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r) && r != ' ':
			if r <= 0xffff {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}
