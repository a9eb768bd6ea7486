// Package printers turns the built-in kinds rayctl serves into
// metav1.Tables, so that `kubectl get` (which asks the server for tables)
// shows the same columns and cell values as on a real cluster.
//
// One generic builder, New, does the work shared by every kind: single
// objects and lists, list metadata, NoHeaders, and the row object per
// IncludeObject. Each kind only contributes its column list and a row
// function. Columns with Priority 1 are the ones kubectl shows with -o wide;
// like the real server, rows always carry every column's cell.
package printers
