// A fluent-logger-golang client for silt-forward's real-client test (tests/clients.rs): sends
// events with nested maps, binary values, EventTime and integer time, with RequestAck (each
// Post waits for the server's ack of its chunk and fails without it). Usage: client HOST PORT
// [tls] (tls: over TLS, the server's certificate checked against the system's roots, or the
// file SSL_CERT_FILE names).
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/fluent/fluent-logger-golang/fluent"
)

func logger(host string, port int, subSecond bool, network string) *fluent.Fluent {
	l, err := fluent.New(fluent.Config{
		FluentNetwork:      network,
		FluentHost:         host,
		FluentPort:         port,
		RequestAck:         true,
		SubSecondPrecision: subSecond,
		Timeout:            5 * time.Second,
		WriteTimeout:       5 * time.Second,
		ReadTimeout:        5 * time.Second,
		MaxRetry:           1,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		os.Exit(2)
	}
	return l
}

func main() {
	network := "tcp"
	if len(os.Args) == 4 && os.Args[3] == "tls" {
		network = "tls"
	} else if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: client HOST PORT [tls]")
		os.Exit(2)
	}
	port, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "port:", err)
		os.Exit(2)
	}
	for _, subSecond := range []bool{true, false} {
		l := logger(os.Args[1], port, subSecond, network)
		tag := "go.int"
		if subSecond {
			tag = "go.ns"
		}
		for i := 0; i < 5; i++ {
			record := map[string]interface{}{
				"n":      i,
				"msg":    fmt.Sprintf("hello %d", i),
				"bin":    []byte{0, 1, 255},
				"nested": map[string]interface{}{"list": []interface{}{1, "x", true}, "f": 1.5},
			}
			tm := time.Unix(1700000000+int64(i), 123456789)
			if err := l.PostWithTime(tag, tm, record); err != nil {
				fmt.Fprintln(os.Stderr, "post:", err)
				os.Exit(1)
			}
		}
		if err := l.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "close:", err)
			os.Exit(1)
		}
	}
}
