package dvcr

import "fmt"

// ConfigOptions of one registry instance.
type ConfigOptions struct {
	Addr, DebugAddr string
	Storage         string
	ReadOnly        bool
	HTTPSecret      string
	Htpasswd        string
	Cert, Key       string
}

// Config is a distribution 2.8 configuration: filesystem storage, htpasswd, TLS, Prometheus on
// the debug listener. The chart's dvcr-config.yaml template says the same.
func Config(o ConfigOptions) []byte {
	return fmt.Appendf(nil, `version: 0.1
log:
  level: info
  formatter: text
storage:
  filesystem:
    rootdirectory: %q
  delete:
    enabled: true
  maintenance:
    readonly:
      enabled: %t
http:
  addr: %q
  secret: %q
  tls:
    certificate: %q
    key: %q
  debug:
    addr: %q
    prometheus:
      enabled: true
      path: /metrics
auth:
  htpasswd:
    realm: dvcr
    path: %q
`, o.Storage, o.ReadOnly, o.Addr, o.HTTPSecret, o.Cert, o.Key, o.DebugAddr, o.Htpasswd)
}
