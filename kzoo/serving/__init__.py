"""Serving kzoo's SavedModels with TF Serving: the contract check (TF Serving's C++ loading path through
TensorFlow's C API, and an op audit per TF Serving release), REST and gRPC requests, and the model config file."""

from kzoo.serving.contract_loader import ContractLoader, ServingError
from kzoo.serving.model_config import model_config, served_models
from kzoo.serving.op_audit import DEFAULT_TF_SERVING, TF_SERVING_RELEASES, OpAudit, audit_ops
from kzoo.serving.requests import grpc_request, read_grpc_response, read_rest_response, rest_request, rest_url
