// Package check tests the deployment files under deploy/: every manifest in
// deploy/kubernetes and every rendering of the Helm chart decodes strictly
// into the Kubernetes API types (an unknown or misspelt field fails), and
// the chart's defaults describe the same pod as the raw DaemonSet; and
// promtool checks deploy/prometheus's rules, runs their unit tests, and
// parses every query of deploy/grafana's dashboard.
//
// It is a module of its own so that the sysray module does not depend on
// the Kubernetes API types. Run it with `cd deploy/check && go test ./...`.
package check
