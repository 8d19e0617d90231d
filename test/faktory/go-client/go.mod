module github.com/worq-dev/worq/test/faktory/go-client

go 1.26.0

require github.com/contribsys/faktory v1.9.4
