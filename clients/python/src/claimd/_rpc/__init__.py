"""Private wire-compatible copies of google.rpc.Status and google.rpc.BadRequest
(`status.proto`, generated into `status_pb2`), for decoding claimd's error details."""
