module silt-forward-go-client

go 1.23.0

require github.com/fluent/fluent-logger-golang v1.10.2

require (
	github.com/philhofer/fwd v1.2.0 // indirect
	github.com/tinylib/msgp v1.3.0 // indirect
)
