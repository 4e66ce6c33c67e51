"""claimd.v1, generated from proto/claimd/v1/claims.proto: the messages (`claims_pb2`, typed
by `claims_pb2.pyi`) and the ClaimService stub (`claims_pb2_grpc`). Do not edit the
generated modules: `python gen_stubs.py` in clients/python writes them."""
