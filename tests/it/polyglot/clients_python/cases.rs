//! The pytest cases each run of the Python package's suite must show as PASSED
//! (`clients_python.rs`): by name, and the HTTP cases once per kind of mounting.

/// Cases every run must pass, whatever the claimd: every decision, the with block, wait,
/// the field name of an error, their asyncio variants, the installed version, a tenant
/// quota's `QuotaError` (on the quota claimd of `CLAIMD_QUOTA_TARGET`).
pub const QUICK_CASES: &[&str] = &[
    "test_inside_a_span_a_call_carries_its_traceparent_and_never_baggage",
    "test_outside_a_span_nothing_is_added",
    "test_without_the_opentelemetry_api_nothing_is_added",
    "test_a_first_claim_holds_the_lease_and_a_duplicate_is_in_flight",
    "test_a_completed_claim_replays_the_stored_response",
    "test_a_retried_claim_answers_retry_scheduled_with_when_it_is_due",
    "test_a_quarantined_claim_answers_quarantined_with_the_last_error",
    "test_the_same_key_with_another_fingerprint_is_a_conflict",
    "test_the_with_block_completes_with_the_response_set_inside_it",
    "test_an_exception_in_the_with_block_retries_and_propagates",
    "test_a_waiting_claim_gets_the_completed_response",
    "test_an_empty_key_is_invalid_argument_naming_the_field_key",
    "test_errors_never_carry_the_token_the_api_key_or_the_payload",
    "test_async_claims_answer_claimed_in_flight_completed_and_conflict",
    "test_async_with_completes_with_the_response_and_retries_on_an_exception",
    "test_an_async_waiting_claim_gets_the_completed_response",
    "test_async_errors_carry_the_code_and_the_field",
    "test_the_package_version_is_the_proto_version",
    "test_the_suite_runs_against_the_installed_wheel_not_the_checkout",
    "test_a_claim_over_the_tenant_quota_raises_quota_error_with_the_quota_and_a_positive_delay",
    "test_an_async_claim_over_the_tenant_quota_raises_quota_error_too",
    "test_under_the_decorator_a_claim_over_the_quota_raises_quota_error_and_the_function_never_runs",
    "test_a_resource_exhausted_without_quota_details_stays_a_plain_claimd_error",
];

/// The decorator and the Idempotency-Key handling over real HTTP: every run passes them, on
/// every claimd. The HTTP cases run on each kind of mounting (`KINDS`): FastAPI with the ASGI
/// middleware and with the dependency (uvicorn), Flask with the WSGI middleware and Django
/// with its middleware (waitress); besides, Django's test client and the FastAPI mountings.
pub const IDEMPOTENCY_CASES: &[&str] = &[
    "test_twenty_concurrent_calls_run_the_function_once_and_return_one_value",
    "test_a_duplicate_returns_the_stored_value_and_other_arguments_are_a_conflict",
    "test_an_exception_retries_and_propagates_then_retry_scheduled",
    "test_a_permanent_error_quarantines_the_key",
    "test_a_result_too_large_to_store_settles_the_key_and_is_not_run_again",
    "test_a_result_the_serializer_cannot_write_quarantines_the_key",
    "test_in_flight_after_the_wait_raises_in_flight",
    "test_claimd_down_raises_unavailable_and_the_function_is_not_run",
    "test_async_twenty_concurrent_calls_run_once_and_an_exception_retries",
    "test_async_claims_made_on_first_use_and_in_flight",
    "test_a_str_fingerprint_is_refused_naming_the_field",
    "test_bare_and_quoted_keys_are_accepted[asgi-dGVzdA==]",
    "test_bare_and_quoted_keys_are_accepted[depends-order@123]",
    "test_bare_and_quoted_keys_are_accepted[wsgi-order@123]",
    "test_bare_and_quoted_keys_are_accepted[django-dGVzdA==]",
    "test_a_replay_never_carries_headers_the_connection_header_names[asgi]",
    "test_a_replay_never_carries_headers_the_connection_header_names[depends]",
    "test_on_django_a_signed_in_user_is_one_scope_across_sessions",
    "test_the_view_runs_once_and_its_response_is_replayed_without_its_cookies",
    "test_a_missing_key_is_400_and_another_body_or_route_with_the_key_is_422",
    "test_signed_in_users_are_scoped_by_their_id_not_their_session",
    "test_a_view_that_raises_gives_the_key_back_with_only_its_type_name",
    "test_client_of_may_be_a_dotted_path_in_the_setting",
    "test_a_wrong_setting_fails_when_django_loads_the_middleware[None-missing]",
    "test_on_a_route_of_another_class_the_dependency_is_refused_when_the_route_is_added",
    "test_as_an_endpoint_parameter_the_dependency_is_refused_when_the_route_is_added",
    "test_with_the_app_routers_route_class_an_http_exception_is_an_answer_replayed",
    "test_a_route_of_the_class_without_the_dependency_is_untouched",
    "test_an_authorization_header_scopes_the_key_by_its_digest",
    "test_without_authorization_the_named_session_cookie_scopes_the_key_by_its_digest",
    "test_with_neither_the_key_is_anonymous",
    "test_set_cookie_hop_by_hop_and_connection_named_headers_are_never_stored",
];

/// The kinds of mounting the HTTP cases run on (their pytest ids).
pub const KINDS: &[&str] = &["asgi", "depends", "wsgi", "django"];

/// The HTTP cases each kind of mounting passes: `<case>[<kind>]`.
pub const PER_KIND_CASES: &[&str] = &[
    "test_twenty_concurrent_retries_run_the_handler_once_and_all_get_one_response",
    "test_a_5xx_response_is_stored_and_replayed_and_the_handler_not_run_again",
    "test_an_oversized_response_settles_the_key_and_the_handler_is_not_run_again",
    "test_another_body_with_the_same_key_is_422",
    "test_the_same_key_on_another_route_is_422",
    "test_canonical_json_bodies_are_one_request_not_a_conflict",
    "test_a_missing_key_is_400_and_a_malformed_one_too",
    "test_a_handler_that_raises_gives_the_key_back_and_its_error_is_only_the_type",
    "test_claimd_down_is_503_with_retry_after_and_the_handler_not_run",
    "test_a_claim_refused_by_the_tenant_quota_is_503_with_retry_after_and_the_handler_not_run",
    "test_retry_server_errors_gives_a_5xx_back_instead_of_storing_it",
    "test_a_request_still_running_after_the_wait_is_409_with_retry_after",
    "test_two_users_with_one_key_and_body_each_run_their_handler",
    "test_two_session_cookies_with_one_key_and_body_each_run_their_handler",
    "test_a_replay_never_carries_set_cookie",
];

/// Cases of the runs on both stores besides: the heartbeat keeping a 1 s lease past 3 s,
/// takeovers reported through `lost`, a retry claimed again when due.
pub const SLOW_CASES: &[&str] = &[
    "test_a_retried_claim_is_retry_scheduled_until_due_then_claimed_with_its_checkpoint",
    "test_the_background_heartbeat_keeps_a_one_second_lease_alive_past_three_seconds",
    "test_a_stalled_holder_learns_of_the_takeover_through_lost",
    "test_a_stopped_lease_runs_out_and_is_taken_over_with_its_recovery_payload",
    "test_a_lease_nobody_references_stops_heartbeating_and_runs_out",
    "test_async_retry_is_scheduled_then_claimed_and_quarantine_answers_quarantined",
    "test_the_async_heartbeat_keeps_a_one_second_lease_alive_past_three_seconds",
    "test_an_async_holder_whose_loop_stalled_learns_of_the_takeover_through_lost",
    "test_a_holder_that_dies_mid_call_is_taken_over",
    "test_a_holder_that_dies_mid_request_is_taken_over_by_a_retry[asgi]",
    "test_a_holder_that_dies_mid_request_is_taken_over_by_a_retry[depends]",
    "test_a_holder_that_dies_mid_request_is_taken_over_by_a_retry[wsgi]",
    "test_a_holder_that_dies_mid_request_is_taken_over_by_a_retry[django]",
];
