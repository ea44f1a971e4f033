"""Onyx's own context-assembly tests, replayed as conversation documents.

Every ``tests/data/assembly/*.conv.*`` reproduces one scenario of the appendix of
``reference/onyx-context-assembly.md`` (its leading comment names the Onyx test and line).
``check_scenario`` is the only code that calls the pipeline: it runs ``analyze`` on the file
exactly as ``promptls assemble`` does, renders the result as text and compares it with the
golden ``<case>.expected`` (``UPDATE_GOLDEN=1`` rewrites those). A regenerated golden file
could silently accept a wrong result, so ``EXPECT`` also states, per case, the structure the
reference demands (segment order, dropped ids, error codes, and the texts Onyx's test
checks); it is checked on every run.

The folder's ``promptls.toml`` pins the encoding to cl100k_base so that measured counts do
not depend on which tiktoken files happen to be cached.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from assembly.host import Analysis
from assembly.text import LineIndex
from tests.support.engine import analyze
from tests.support.golden import check_golden

DATA = Path(__file__).resolve().parent.parent / "data" / "assembly"
TODAY = dt.date(2026, 7, 15)
CASES = sorted(p for p in DATA.iterdir() if ".conv." in p.name)

# The structure each scenario must have, taken from the reference (not from a run).
# Keys: order (layout ids), dropped, errors (codes of error diagnostics); optional:
# orphans, forgotten (file ids), tokens {id: n}, roles (provider roles in order),
# contains / absent {id: [substrings of the provider text]}, exact {id: text},
# starts {id: prefix}, images {id: [image refs]}, budget {field: n},
# messages {code: substring of that diagnostic}, compression {field: value},
# cache_prefix (cache_prefix_length), cache_control [ids marked], n_images {id: n}.
EXPECT: dict[str, dict[str, Any]] = {
    # -- A1 TestConstructMessageHistory
    "a1_01_basic_no_truncation": {
        "order": ["$system", "u1", "a1", "u2"],
        "dropped": [],
        "errors": [],
    },
    "a1_02_with_custom_agent_prompt": {
        "order": ["$system", "u1", "a1", "$custom_agent", "u2"],
        "dropped": [],
        "errors": [],
        "roles": ["system", "user", "assistant", "user", "user"],
    },
    "a1_03_with_context_files": {
        "order": ["$system", "u1", "$project_files", "u2", "$reminder"],
        "dropped": [],
        "errors": [],
        "contains": {"$project_files": ["documents"]},
        "roles": ["system", "user", "user", "user", "user"],
    },
    "a1_04_with_reminder_message": {
        "order": ["$system", "u1", "$reminder"],
        "dropped": [],
        "errors": [],
        "exact": {"$reminder": "<system-reminder>\nRemember to cite sources\n</system-reminder>"},
        "tokens": {"$reminder": 10},
    },
    "a1_05_tool_calls_after_last_user_message": {
        "order": ["$system", "u1", "a1", "u2", "a_tc", "tr"],
        "dropped": [],
        "errors": [],
        "exact": {"tr": "Search results..."},
    },
    "a1_06_custom_agent_and_project_before_last_user_with_tools_after": {
        "order": ["$system", "u1", "$custom_agent", "$project_files", "u2", "a_tc", "$reminder"],
        "dropped": [],
        "errors": [],
    },
    "a1_07_does_not_duplicate_project_images": {
        "order": ["$system", "u1"],
        "dropped": [],
        "errors": [],
        "images": {"u1": ["project_image"]},
    },
    "a1_08_truncation_from_top": {
        "order": ["$system", "u2", "a2", "u3"],
        "dropped": ["u1", "a1"],
        "errors": [],
        "budget": {"history_budget": 70},
    },
    "a1_09_truncation_preserves_last_user_and_messages_after": {
        "order": ["$system", "u2", "a_tc", "tr"],
        "dropped": ["u1"],
        "errors": [],
    },
    "a1_10_truncation_drops_orphaned_tool_response": {
        "order": ["$system", "a1", "u2"],
        "dropped": ["u1", "a_tc"],
        "orphans": ["tr"],
        "errors": [],
    },
    "a1_11_preserves_non_orphaned_tool_response": {
        "order": ["$system", "a_tc", "tr", "u2"],
        "dropped": ["u1"],
        "orphans": [],
        "errors": [],
    },
    "a1_12_empty_history": {
        "order": ["$system", "$custom_agent", "$project_files", "$reminder"],
        "dropped": [],
        "errors": [],
    },
    "a1_13_no_user_message_raises_error": {
        "order": [],
        "dropped": [],
        "errors": ["no-user-message"],
    },
    "a1_14_not_enough_tokens_for_required_elements": {
        "order": [],
        "dropped": [],
        "errors": ["last-turn-over-budget"],
        "budget": {"history_budget": 0},
        "messages": {"last-turn-over-budget": "need 50 tokens but only 0 are left"},
    },
    "a1_15_not_enough_tokens_for_last_user_and_messages_after": {
        "order": [],
        "dropped": [],
        "errors": ["last-turn-over-budget"],
        "messages": {"last-turn-over-budget": "need 60 tokens but only 40 are left"},
    },
    "a1_16_complex_scenario_all_elements": {
        "order": [
            "$system",
            "u1",
            "a1",
            "u2",
            "a2",
            "$custom_agent",
            "$project_files",
            "u3",
            "a_tc",
            "tr",
            "$reminder",
        ],
        "dropped": [],
        "errors": [],
        "contains": {"$project_files": ["documents"], "$reminder": ["Cite sources"]},
    },
    "a1_17_context_files_json_format": {
        "order": ["$system", "$project_files", "u1", "$reminder"],
        "dropped": [],
        "errors": [],
        "contains": {
            "$project_files": [
                "Here are some documents provided for context",
                '"documents"',
                '"document": 1',
                '"document": 2',
                '"contents"',
                "Project file 0 content",
                "Project file 1 content",
            ]
        },
    },
    "a1_18_file_metadata_for_tool_produces_message": {
        "order": ["$system", "$project_file_list", "u1"],
        "dropped": [],
        "errors": [],
        "roles": ["system", "user", "user"],
        "contains": {
            "$project_file_list": ['- file_id="xlsx-1" filename="report.xlsx" (~100,000 chars)']
        },
    },
    "a1_19_metadata_only_and_text_files_both_present": {
        "order": ["$system", "$project_files", "$project_file_list", "u1", "$reminder"],
        "dropped": [],
        "errors": [],
        "contains": {
            "$project_files": ["documents", "Text file content here"],
            "$project_file_list": ["data.xlsx"],
        },
    },
    # -- A2 TestNonVisionImageBudgeting
    "a2_full_image_cost_evicts_the_image_message": {
        "order": ["a1", "u2"],
        "dropped": ["u1"],
        "errors": [],
    },
    "a2_marker_cost_keeps_the_image_message": {
        "order": ["u1", "a1", "u2"],
        "dropped": [],
        "errors": [],
        "contains": {"u1": ["look at this", "img0", "does not support image input"]},
        "images": {"u1": []},
    },
    # -- A3 TestForgottenFileMetadata
    "a3_file_message_present_no_forgotten_metadata": {
        "order": ["$system", "f1", "a1", "u1"],
        "dropped": [],
        "forgotten": [],
        "errors": [],
    },
    "a3_file_message_dropped_by_truncation_gets_forgotten_metadata": {
        "order": ["$system", "a1", "$forgotten_files", "u1"],
        "dropped": ["f1"],
        "forgotten": ["file-abc"],
        "errors": [],
        "contains": {"$forgotten_files": ["Use the read_file tool", "moby_dick.txt", "file-abc"]},
    },
    "a3_orphaned_metadata_triggers_forgotten_files": {
        "order": ["$system", "s1", "$forgotten_files", "u1"],
        "dropped": [],
        "forgotten": ["file-abc"],
        "errors": [],
        "contains": {"$forgotten_files": ["moby_dick.txt", "file-abc", "(~0 chars)"]},
    },
    "a3_mixed_files_only_dropped_ones_appear_in_forgotten": {
        "order": ["$system", "ok1", "fb", "ok2", "$forgotten_files", "u1"],
        "dropped": ["fa"],
        "forgotten": ["file-a"],
        "errors": [],
        "contains": {"$forgotten_files": ["big_file.txt", "file-a"]},
        "absent": {"$forgotten_files": ["small_file.txt"]},
    },
    "a3_no_metadata_dict_means_no_forgotten_message": {
        "order": ["$system", "a1", "u1"],
        "dropped": ["f1"],
        "forgotten": [],
        "errors": [],
    },
    "a3_multiple_orphaned_files_all_appear_in_forgotten": {
        "order": ["$system", "s1", "$forgotten_files", "u1"],
        "dropped": [],
        "forgotten": ["file-a", "file-b"],
        "errors": [],
        "contains": {"$forgotten_files": ["report.pdf", "data.csv"]},
    },
    "a3_forgotten_metadata_persists_turn_0": {
        "order": ["$system", "s1", "$forgotten_files", "u_last"],
        "dropped": [],
        "forgotten": ["file-abc"],
        "errors": [],
        "contains": {"$forgotten_files": ["moby_dick.txt"]},
    },
    "a3_forgotten_metadata_persists_turn_4": {
        "order": [
            "$system",
            "s1",
            "q0",
            "r0",
            "q1",
            "r1",
            "q2",
            "r2",
            "q3",
            "r3",
            "$forgotten_files",
            "u_last",
        ],
        "dropped": [],
        "forgotten": ["file-abc"],
        "errors": [],
        "contains": {"$forgotten_files": ["moby_dick.txt"]},
    },
    # -- A6 TestSelectReminderText (through the whole pipeline)
    "a6_open_url_reminder_when_tool_available": {
        "order": ["u1", "a_tc", "tr", "$reminder"],
        "dropped": [],
        "errors": [],
        "contains": {"$reminder": ["open_url"]},
        "absent": {"$reminder": ["Answer in French", "cite"]},
    },
    "a6_no_open_url_reminder_when_tool_disabled": {
        "order": ["u1", "a_tc", "tr", "$reminder"],
        "dropped": [],
        "errors": [],
        "contains": {"$reminder": ["cite"]},
        "absent": {"$reminder": ["open_url"]},
    },
    "a6_open_url_reminder_suppressed_on_last_cycle": {
        "order": ["u1", "a_tc", "tr", "$reminder"],
        "dropped": [],
        "errors": [],
        "contains": {"$reminder": ["last cycle"]},
        "absent": {"$reminder": ["open_url"]},
        "budget": {"tools": 0},
    },
    "a6_image_gen_reminder_takes_precedence": {
        "order": ["u1", "a_tc", "tr_image", "tr_search", "$reminder"],
        "dropped": [],
        "errors": [],
        "contains": {"$reminder": ["describe the image"]},
        "absent": {"$reminder": ["open_url", "cite"]},
        "budget": {"tools": 0},
    },
    "a6_open_url_reminder_only_after_previous_cycle": {
        "order": ["u1", "a_tc1", "tr1", "a_tc2", "tr2", "$reminder"],
        "dropped": [],
        "errors": [],
        "contains": {"$reminder": ["cite"]},
        "absent": {"$reminder": ["open_url"]},
    },
    # -- A7 TestTranslateHistoryToLlmFormat / TestImageCap / TestNonVisionImageStripping
    "a7_preserves_structured_tool_history_for_openai": {
        "order": ["u1", "a_tc", "tr", "$reminder"],
        "dropped": [],
        "errors": [],
        "roles": ["user", "assistant", "tool", "user"],
        "contains": {"a_tc": ["id=51381e0b0", "name=internal_search"], "tr": ["tool result body"]},
    },
    "a7_sanitizes_tool_call_name": {
        "order": ["u1", "a_tc", "tr"],
        "dropped": [],
        "errors": [],
        "contains": {"a_tc": ["name=ServiceNow_API"]},
    },
    "a7_flattens_tool_history_for_ollama": {
        "order": ["u1", "a_tc", "tr", "$reminder"],
        "dropped": [],
        "errors": [],
        "roles": ["user", "assistant", "user", "user"],
        "contains": {"a_tc": ["51381e0b0"], "tr": ["51381e0b0", "tool result body"]},
        "absent": {"a_tc": ["<tool_call"]},
        "exact": {"tr": "[Tool Result] id=51381e0b0\ntool result body"},
    },
    "a7_flattens_multiple_assistant_tool_calls_for_ollama": {
        # internal_search was called this turn: Onyx asks to cite from then on
        # (llm_loop.py:1381-1386), so the citation reminder follows.
        "order": ["u1", "a_tc", "$reminder"],
        "dropped": [],
        "errors": [],
        "exact": {
            "a_tc": "I will use tools now.\n"
            '[Tool Call] name=internal_search id=call-a args={"queries": ["alpha"]}\n'
            '[Tool Call] name=internal_search id=call-b args={"queries": ["beta"]}'
        },
    },
    "a7_tool_call_response_requires_tool_call_id": {
        "order": ["u1", "a_tc"],
        "dropped": [],
        "orphans": ["tr"],
        "errors": ["schema-error"],
        "messages": {"schema-error": "a tool message needs `tool_call_id`"},
    },
    "a7_image_cap_disabled_passes_everything_through": {
        "order": ["u1"],
        "dropped": [],
        "errors": [],
        "images": {"u1": [f"img{i}" for i in range(100)]},
    },
    "a7_image_cap_enabled_caps_azure_and_emits_reminder": {
        "order": ["u1", "$images_dropped"],
        "dropped": [],
        "errors": [],
        "images": {"u1": ["img0", "img1", "img2"]},
        "exact": {
            "$images_dropped": "<system-reminder>\n2 earlier image(s) attached to this "
            "conversation were omitted to fit the model's per-request image limit.\n"
            "</system-reminder>"
        },
    },
    "a7_image_cap_does_not_cap_openai": {
        "order": ["u1"],
        "dropped": [],
        "errors": [],
        "images": {"u1": ["img0", "img1", "img2", "img3", "img4"]},
    },
    "a7_strips_image_parts_for_non_vision_model": {
        "order": ["u1"],
        "dropped": [],
        "errors": [],
        "images": {"u1": []},
        "contains": {"u1": ["img0", "does not support image input"]},
    },
    "a7_keeps_image_parts_for_vision_model": {
        "order": ["u1"],
        "dropped": [],
        "errors": [],
        "images": {"u1": ["img0"]},
        "contains": {"u1": ["[attached image — file_id: img0]"]},
    },
    "a7_text_only_history_for_non_vision_model": {
        "order": ["u1"],
        "dropped": [],
        "errors": [],
        "exact": {"u1": "just text"},
    },
    # -- A9 test_compression.py
    "a9_no_compression_when_under_threshold": {
        "order": ["u1", "a1", "u2"],
        "dropped": [],
        "errors": [],
        "compression": {"triggered": False, "threshold": 6000, "history_tokens": 1000},
    },
    "a9_compression_triggered_when_over_threshold": {
        "order": ["u1", "a1", "u2"],
        "dropped": [],
        "errors": [],
        "compression": {
            "triggered": True,
            "threshold": 6000,
            "history_tokens": 7000,
            "tokens_for_recent": 1400,
            "summarize": ["u1", "a1"],
            "keep": ["u2"],
        },
    },
    "a9_get_messages_returns_summary_content": {
        "order": ["m1", "m2"],
        "dropped": [],
        "errors": [],
        "compression": {
            "triggered": True,
            "tokens_for_recent": 50,
            "summarize": ["m1"],
            "keep": ["m2"],
        },
    },
    "a9_messages_after_summary_cutoff_only": {
        "order": ["s1", "m3"],
        "dropped": [],
        "errors": [],
        "compression": {
            "triggered": True,
            "tokens_for_recent": 50,
            "summarize": [],
            "keep": ["m3"],
        },
    },
    "a9_no_summary_considers_all_messages": {
        "order": ["m1", "m2", "m3"],
        "dropped": [],
        "errors": [],
        "compression": {
            "triggered": True,
            "tokens_for_recent": 50,
            "summarize": ["m1", "m2"],
            "keep": ["m3"],
        },
    },
    "a9_empty_messages_filtered_out": {
        "order": ["m1", "m2", "m3"],
        "dropped": [],
        "errors": [],
        "compression": {"triggered": True, "summarize": ["m1"], "keep": ["m3"]},
    },
    "a9_empty_history_returns_empty": {
        "order": [],
        "dropped": [],
        "errors": [],
        "compression": {"triggered": False, "summarize": [], "keep": []},
    },
    "a9_total_history_tokens_includes_tool_call_tokens": {
        "order": ["m1", "m2"],
        "dropped": [],
        "errors": [],
        "compression": {"history_tokens": 210},
    },
    "a9_no_user_in_recent_tail_keeps_last_user_exchange": {
        "order": ["u1", "a2", "u3", "a4"],
        "dropped": [],
        "errors": [],
        "compression": {
            "triggered": True,
            "tokens_for_recent": 60,
            "summarize": ["u1", "a2"],
            "keep": ["u3", "a4"],
        },
    },
    "a9_recent_share_reached_exactly_keeps": {
        "order": ["u1", "a2", "u3", "u4"],
        "dropped": [],
        "errors": [],
        "compression": {
            "triggered": True,
            "tokens_for_recent": 150,
            "summarize": ["u1", "a2"],
            "keep": ["u3", "u4"],
        },
    },
    "a9_no_user_messages_at_all_skips_compression": {
        "order": [],
        "dropped": [],
        "errors": ["no-user-message"],
        "compression": {"triggered": True, "summarize": [], "keep": ["a1", "a2"]},
    },
    "a9_find_summary_for_branch_returns_matching_branch": {
        "order": ["s1", "m3", "m4", "m5"],
        "dropped": [],
        "errors": [],
    },
    "a9_find_summary_for_branch_ignores_other_branch": {
        "order": ["m1", "m2", "m6", "m7"],
        "dropped": [],
        "errors": [],
    },
    "a9_cutoff_always_before_user_message": {
        "order": ["u1", "a2", "tr3", "a4", "u5", "a6"],
        "dropped": [],
        "errors": [],
        "compression": {
            "triggered": True,
            "tokens_for_recent": 300,
            "summarize": ["u1", "a2", "tr3", "a4"],
            "keep": ["u5", "a6"],
        },
    },
    "a9_summarization_request_first_time": {
        "order": ["u1", "u2", "a3", "tr3", "a4", "u5", "u6"],
        "dropped": [],
        "errors": [],
        "compression": {
            "triggered": True,
            "summarize": ["u1", "u2", "a3", "tr3", "a4"],
            "keep": ["u6"],
            "request": [
                ("system", "You are summarizing a conversation"),
                ("user", "Hello"),
                ("user", "How are you?"),
                ("assistant", "[Used tools: search]"),
                ("assistant", "I'm doing great!"),
                (
                    "user",
                    "<context_cutoff> Stop summarizing the rest of the conversation past "
                    "this point. </context_cutoff>",
                ),
                ("user", "Recent user msg"),
                ("user", "Help summarize the conversation up to the cutoff point"),
            ],
        },
    },
    "a9_summarization_request_progressive": {
        "order": ["s1", "u1", "u2"],
        "dropped": [],
        "errors": [],
        "compression": {
            "triggered": True,
            "summarize": ["u1"],
            "keep": ["u2"],
            "request": [
                ("system", "You are summarizing a conversation"),
                ("user", "User msg"),
                ("user", "<context_cutoff>"),
                ("user", "Recent msg"),
                ("user", "Update the existing summary"),
            ],
            "request_contains": {0: ["# Existing summary", "Previous conversation summary"]},
        },
    },
    # -- A11 test_chat_utils.py
    "a11_tool_call_response_history_message": {
        "order": ["u1", "a_tc", "tr_image", "tr_search", "a1", "u2"],
        "dropped": [],
        "errors": [],
        "exact": {
            "tr_image": '[{"file_id": "img-1", "revised_prompt": "p1"}]',
            "tr_search": "This tool call completed but the results are no longer accessible.",
        },
    },
    "a11_attaches_project_images_to_last_user_message_only_once": {
        "order": ["u1", "a1", "u2"],
        "dropped": [],
        "errors": [],
        "images": {"u1": [], "u2": ["project_image"]},
    },
    # -- A12 test_build_file_context.py
    "a12_build_file_context": {
        "order": ["u1/files/0", "u1/files/1", "u1/files/2", "u1/files/3", "u1"],
        "dropped": [],
        "errors": [],
        "tokens": {"u1/files/0": 3},
        "contains": {
            "u1/files/0": ["hello world"],
            "u1/files/1": ["No machine-readable text"],
            "u1/files/2": ["No machine-readable text"],
            "u1/files/3": ["file_reader"],
        },
        "absent": {"u1/files/0": ["No machine-readable text"], "u1/files/3": ["machine-readable"]},
    },
    # -- A14 prompt placeholders, reminder wrapping, "Formatting re-enabled."
    "a14_user_placeholders": {
        "order": ["$system", "u1"],
        "dropped": [],
        "errors": [],
        "exact": {
            "$system": "Dept: Engineering\n"
            "City: Berlin\n"
            "State=[]\n"
            "Typo: {{user.deparment}}\n"
            'Return JSON like {"a": 1, "nested": {"b": 2}} and \\frac{x}{y}.\n'
            "Engineering in Berlin <a@example.com>\n"
            "Now: Wednesday July 15, 2026\n"
            "# User Information\n\n"
            "## Basic Information\n"
            "- Email: a@example.com"
        },
    },
    "a14_user_placeholders_empty_values": {
        "order": ["$system", "u1"],
        "dropped": [],
        "errors": [],
        "contains": {"$system": ["D= X={{user.bogus}}"]},
    },
    "a14_placeholder_split_across_prompt_parts": {
        "order": ["$system", "$custom_agent", "u1"],
        "dropped": [],
        "errors": [],
        "contains": {
            "$system": ["System ends with {{user.dep"],
            "$custom_agent": ["artment}} and more"],
        },
    },
    "a14_reminder_tag_and_datetime_replaced": {
        "order": ["$system", "u1"],
        "dropped": [],
        "errors": [],
        "contains": {
            "$system": ["# System Reminders", "The current date is Wednesday July 15, 2026."]
        },
        "absent": {"$system": ["{{", "Additional Information"]},
    },
    "a14_datetime_appended_when_aware": {
        "order": ["$system", "$custom_agent", "u1"],
        "dropped": [],
        "errors": [],
        "exact": {
            "$system": "Base instructions.\n\n"
            "Additional Information:\n\t- The current date is Wednesday July 15, 2026.",
            "$custom_agent": "Custom agent instructions.",
        },
    },
    "a14_citation_guidance_replaced_when_citing": {
        "order": ["$system", "$project_files", "u1", "$reminder"],
        "dropped": [],
        "errors": [],
        "contains": {"$system": ["Answer with citations.", "Cite"]},
        "absent": {"$system": ["{{CITATION_GUIDANCE}}"]},
    },
    "a14_organization_profile": {
        "order": ["$system", "u1"],
        "dropped": [],
        "errors": [],
        "contains": {
            "$system": ["## Organization Profile", "- Country: NL", "- Department: Legal"]
        },
    },
    "a14_organization_profile_empty": {
        "order": ["$system", "u1"],
        "dropped": [],
        "errors": [],
        "absent": {"$system": ["Organization Profile", "User Information"]},
    },
    "a14_user_reminder_wrapped_in_mixed_history": {
        "order": ["s1", "u1", "a1", "r1"],
        "dropped": [],
        "errors": [],
        "roles": ["system", "user", "assistant", "user"],
        "exact": {
            "u1": "Hello!",
            "r1": "<system-reminder>\nRemember to be concise.\n</system-reminder>",
        },
    },
    "a14_formatting_reenabled_o1": {
        "order": ["$system", "u1"],
        "dropped": [],
        "errors": [],
        "exact": {"$system": "Formatting re-enabled. You are a helpful assistant."},
    },
    "a14_formatting_reenabled_o3_mini_first_system_only": {
        "order": ["$system", "s2", "u1"],
        "dropped": [],
        "errors": [],
        "roles": ["system", "system", "user"],
        "exact": {"s2": "Second system message."},
        "starts": {"$system": "Formatting re-enabled. System prompt here."},
    },
    "a14_formatting_reenabled_gpt_5": {
        "order": ["$system", "u1"],
        "dropped": [],
        "errors": [],
        "starts": {"$system": "Formatting re-enabled. System prompt here."},
    },
    "a14_formatting_not_for_gpt_4o": {
        "order": ["$system", "u1"],
        "dropped": [],
        "errors": [],
        "exact": {"$system": "You are a helpful assistant."},
    },
    "a14_formatting_o1_without_system_message": {
        "order": ["u1"],
        "dropped": [],
        "errors": [],
        "roles": ["user"],
        "exact": {"u1": "Hello!"},
    },
    # -- issue 12: the remaining deviations from Onyx and the inputs now expressible
    "f01_marker_measured_on_a_zero_file_id": {
        "order": ["a1", "u2"],
        "dropped": ["u1"],
        "errors": [],
    },
    "f02_compression_total_leaves_out_uploads_and_images": {
        "order": ["u1/files/0", "u1", "a1", "u2"],
        "dropped": [],
        "errors": [],
        "compression": {"triggered": False, "history_tokens": 27, "threshold": 7500},
    },
    "f03_python_generated_files_add_the_file_link_reminder": {
        "order": ["u1", "a1", "t1", "$reminder"],
        "dropped": [],
        "errors": [],
        "contains": {"$reminder": ["Answer in English.", "[filename](file_link)"]},
    },
    "f03b_python_without_generated_files_has_no_file_link_reminder": {
        "order": ["u1", "a1", "t1", "$reminder"],
        "dropped": [],
        "errors": [],
        "exact": {"$reminder": "<system-reminder>\nAnswer in English.\n</system-reminder>"},
    },
    "f04_web_search_without_results_gets_no_open_url_nudge": {
        "order": ["u1", "a1", "t1", "$reminder"],
        "dropped": [],
        "errors": [],
        "contains": {"$reminder": ["Remember to cite"]},
        "absent": {"$reminder": ["open_url"]},
    },
    "f05_citing_follows_the_calls_made": {
        "order": ["u1", "a1", "$reminder"],
        "dropped": [],
        "errors": [],
        "contains": {"$reminder": ["Remember to cite"]},
    },
    "f06_whitespace_message_stays_in_the_summary_request": {
        "order": ["u1", "a1", "u2", "a2", "u3"],
        "dropped": [],
        "errors": [],
        "compression": {
            "triggered": True,
            "summarize": ["u1", "a1", "u2", "a2"],
            "keep": ["u3"],
            "request": [
                ("system", "You are summarizing"),
                ("user", "Tell me about the project"),
                ("assistant", "   "),
                ("user", "And the schedule?"),
                ("assistant", "It ships in May."),
                ("user", "<context_cutoff>"),
                ("user", "Thanks"),
                ("user", "Help summarize"),
            ],
        },
    },
    "f07_azure_image_cap_when_turned_on": {
        "order": ["u1", "$images_dropped"],
        "dropped": [],
        "errors": [],
        "n_images": {"u1": 50},
        "contains": {"$images_dropped": ["2 earlier image(s)"]},
    },
    "f08_listing_trimmed_keeps_the_cut_file_and_the_history_that_fits": {
        "order": ["a1", "$forgotten_files", "u2"],
        "dropped": ["sum", "u1/files/0", "u1"],
        "errors": [],
        "forgotten": ["5f0e9c3d-q3-report"],
        "tokens": {"$forgotten_files": 65},
    },
    "f09_tool_call_token_counts_add_to_a_pinned_message_count": {
        "order": ["m1", "m2", "t1", "t2"],
        "dropped": [],
        "errors": [],
        "tokens": {"m2": 110},
        "compression": {"history_tokens": 212},
    },
    "f10_last_n_user_messages": {
        "order": ["u2", "a2", "$forgotten_files", "u3"],
        "dropped": ["u1/files/0", "u1", "a1", "u2/files/0"],
        "errors": [],
        "forgotten": ["1a2b-spec", "3c4d-plan"],
    },
    "f11_prompt_cache_prefix_marked_for_anthropic": {
        "order": ["$system", "u1", "a1", "u2"],
        "dropped": [],
        "errors": [],
        "cache_prefix": 3,
        "cache_control": ["a1"],
    },
    "f12_no_cache_prefix_by_default": {
        "order": ["$system", "u1", "a1", "u2"],
        "dropped": [],
        "errors": [],
        "cache_prefix": 0,
        "cache_control": [],
    },
    "f13_file_still_processing": {
        "order": ["u1/files/0", "u1/files/1", "u1"],
        "dropped": [],
        "errors": [],
        "contains": {
            "u1/files/0": ["File: deck.pptx\nThis file is still being processed"],
            "u1/files/1": ["No machine-readable text"],
        },
        "tokens": {"u1/files/0": 46},
    },
    "f14_additional_context": {
        "order": ["u1", "a1", "u2/files/0", "$additional_context", "u2"],
        "dropped": [],
        "errors": [],
        "contains": {"$additional_context": ["the deploy of 14:02 failed"]},
        "roles": ["user", "assistant", "user", "user", "user"],
    },
    "f15_numeric_message_ids_as_onyx_stores_them": {
        "order": ["7", "4", "5", "6"],
        "dropped": [],
        "errors": [],
        "exact": {"7": "Kyoto trip planned; Nara added."},
    },
    "f16_custom_agent_prompt_without_a_system_prompt": {
        "order": ["$system", "u1"],
        "dropped": [],
        "errors": [],
        "starts": {"$system": "You are the release assistant. Answer in one paragraph."},
        "roles": ["system", "user"],
    },
    # -- promptls additions
    "p01_summary_hanging_off_the_branch": {
        "order": ["$system", "s1", "$forgotten_files", "u2", "a2"],
        "dropped": [],
        "errors": [],
        "forgotten": ["f-log"],
    },
    "p03_tool_definitions_over_the_window": {
        "order": [],
        "dropped": [],
        "errors": ["budget-overrun"],
        "messages": {"budget-overrun": "tool definitions 76"},
    },
    "p02_tool_failure_reply_costs_50": {
        "order": ["$system", "u1", "a1", "t1", "$reminder"],
        "dropped": [],
        "errors": [],
        "tokens": {"t1": 50},
    },
}


@pytest.mark.parametrize("path", CASES, ids=[p.name.split(".conv.")[0] for p in CASES])
def test_scenario(path: Path) -> None:
    check_scenario(path)


def test_every_fixture_has_an_expectation() -> None:
    names = {p.name.split(".conv.")[0] for p in CASES}
    assert sorted(names - EXPECT.keys()) == []
    assert sorted(EXPECT.keys() - names) == []


def check_scenario(path: Path) -> None:
    """Assemble ``path``, check ``EXPECT`` and compare the rendering with its golden file."""
    case = path.name.split(".conv.")[0]
    analysis = analyze(path, today=TODAY)
    _check_expectation(analysis, EXPECT[case])
    check_golden(_render(analysis), path.with_name(f"{case}.expected"))


# ---------------------------------------------------------------------------- expectation


def _check_expectation(analysis: Analysis, want: dict[str, Any]) -> None:
    a = analysis.assembly
    ids = [e.id for e in a.layout]
    by_id = dict(zip(ids, a.provider_messages, strict=True))
    assert ids == want["order"]
    assert list(a.dropped) == want["dropped"]
    errors = [d.code for d in analysis.diagnostics if d.severity == "error"]
    assert errors == want["errors"]
    if "orphans" in want:
        assert list(a.orphans_dropped) == want["orphans"]
    if "forgotten" in want:
        assert [f.file_id for f in a.forgotten_files] == want["forgotten"]
    for msg_id, n in want.get("tokens", {}).items():
        assert next(e.tokens for e in a.layout if e.id == msg_id) == n, msg_id
    if "roles" in want:
        assert [m["role"] for m in a.provider_messages] == want["roles"]
    for msg_id, subs in want.get("contains", {}).items():
        text = _text(by_id[msg_id])
        for sub in subs:
            assert sub in text, (msg_id, sub)
    for msg_id, subs in want.get("absent", {}).items():
        text = _text(by_id[msg_id])
        for sub in subs:
            assert sub not in text, (msg_id, sub)
    for msg_id, exact in want.get("exact", {}).items():
        assert _text(by_id[msg_id]) == exact, msg_id
    for msg_id, start in want.get("starts", {}).items():
        assert _text(by_id[msg_id]).startswith(start), msg_id
    for msg_id, refs in want.get("images", {}).items():
        assert _images(by_id[msg_id]) == refs, msg_id
    for name, n in want.get("budget", {}).items():
        assert getattr(a.budget, name) == n, name
    for code, sub in want.get("messages", {}).items():
        assert any(d.code == code and sub in d.message for d in analysis.diagnostics), code
    if "cache_prefix" in want:
        assert a.cache_prefix_length == want["cache_prefix"]
    if "cache_control" in want:
        marked = [i for i, m in zip(ids, a.provider_messages, strict=True) if "cache_control" in m]
        assert marked == want["cache_control"]
    for msg_id, n in want.get("n_images", {}).items():
        assert len(_images(by_id[msg_id])) == n, msg_id
    _check_compression(analysis, want.get("compression", {}))


def _check_compression(analysis: Analysis, want: dict[str, Any]) -> None:
    c = analysis.assembly.compression
    for name in ("triggered", "threshold", "history_tokens", "tokens_for_recent"):
        if name in want:
            assert getattr(c, name) == want[name], name
    if "summarize" in want:
        assert list(c.summarize) == want["summarize"]
    if "keep" in want:
        assert list(c.keep) == want["keep"]
    if "request" in want:
        got = [(m["role"], m["content"]) for m in c.request]
        assert [role for role, _ in got] == [role for role, _ in want["request"]]
        for (_, content), (_, start) in zip(got, want["request"], strict=True):
            assert content.startswith(start), (content, start)
    for i, subs in want.get("request_contains", {}).items():
        for sub in subs:
            assert sub in c.request[i]["content"], (i, sub)


def _text(msg: dict[str, Any]) -> str:
    """A provider message's text: its content (text parts joined), then its tool calls."""
    content = msg.get("content")
    if isinstance(content, list):
        text = "\n".join(p["text"] for p in content if p.get("type") == "text")
    else:
        text = content or ""
    for call in msg.get("tool_calls") or ():
        fn = call["function"]
        text += f"\n<tool_call id={call['id']} name={fn['name']} args={fn['arguments']}>"
    return text


def _images(msg: dict[str, Any]) -> list[str]:
    content = msg.get("content")
    if not isinstance(content, list):
        return []
    return [p["image_url"]["url"] for p in content if p.get("type") == "image_url"]


# ---------------------------------------------------------------------------- rendering


def _render(analysis: Analysis) -> str:
    a = analysis.assembly
    b = a.budget
    lines = [
        f"encoding {a.encoding}; available {b.available_tokens} - tools {b.tools} = "
        f"{b.available_tokens - b.tools}; system {b.system}, custom_agent {b.custom_agent}, "
        f"project_files {b.project_files}, reminder {b.reminder} -> history_budget "
        f"{b.history_budget}; used {b.used}",
        "",
    ]
    width = max((len(e.id) for e in a.layout), default=0)
    for e in a.layout:
        cache = "  cache" if e.cache else ""
        lines.append(
            f"{e.segment:<16}{e.id:<{width}}  {e.message.kind:<9}{e.tokens:>6}{cache}".rstrip()
        )
    lines.append("")
    lines.append(f"dropped: {_ids(a.dropped)}")
    lines.append(f"orphans dropped: {_ids(a.orphans_dropped)}")
    forgotten = [f"{f.file_id} {f.filename} ~{f.approx_char_count}" for f in a.forgotten_files]
    lines.append(f"forgotten files: {'; '.join(forgotten) or '-'}")
    c = a.compression
    lines.append(
        f"compression: triggered {'yes' if c.triggered else 'no'}, threshold {c.threshold}, "
        f"history {c.history_tokens}, recent budget {c.tokens_for_recent}; "
        f"summarize {_ids(c.summarize)}; keep {_ids(c.keep)}"
    )
    lines.extend(f"  request {_compact(m)}" for m in c.request)
    lines.append("")
    lines.append("provider messages:")
    lines.extend(f"  {_compact(m)}" for m in a.provider_messages)
    lines.append("")
    lines.append("diagnostics:")
    index = LineIndex(analysis.text)
    for d in analysis.diagnostics:
        where = index.line_col(d.range.start)
        place = f"{where.line + 1}:{where.column + 1}"
        if d.path is not None:
            place = f"{Path(d.path).name}:{place}"
        lines.append(f"  {d.code} {d.severity} {place} {d.message}")
    return "\n".join(lines) + "\n"


def _compact(msg: dict[str, Any]) -> str:
    """Role and the first 60 characters of the text, or the names of the tool calls."""
    content = msg.get("content")
    if isinstance(content, list):
        texts = [p["text"] for p in content if p.get("type") == "text"]
        n_images = sum(1 for p in content if p.get("type") == "image_url")
        text = "\n".join(texts)
        extra = f" +{n_images} image(s)" if n_images else ""
    else:
        text = content or ""
        extra = ""
    calls = msg.get("tool_calls") or ()
    if calls:
        extra += " calls " + ", ".join(f"{c['function']['name']}#{c['id']}" for c in calls)
    if msg["role"] == "tool":
        extra += f" for #{msg['tool_call_id']}"
    shown = json.dumps(text[:60], ensure_ascii=False) + ("…" if len(text) > 60 else "")
    return f"{msg['role']:<9} {shown}{extra}"


def _ids(ids: Any) -> str:
    return ", ".join(ids) or "-"
