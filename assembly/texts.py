"""Fixed texts the pipeline inserts into the model's input.

Strings marked *exact* are Onyx's own, quoted in the reference because black-box tests match
them; the others follow Onyx's intent in our own words (the reference paraphrases them), and
the README says so.
"""

from __future__ import annotations

# exact (reference §4)
TOOL_RESULT_PLACEHOLDER = "This tool call completed but the results are no longer accessible."
# exact (reference §6.4)
FILE_LISTING_HEADER = (
    "You have access to the following files. Use the read_file tool to read sections of any file. "
    "You MUST pass the file_id UUID (not the filename) to read_file:"
)
# exact (reference §6.5)
PROJECT_DOCUMENTS_HEADER = (
    "Here are some documents provided for context, they may not all be relevant:\n"
)
# exact (reference §8)
REMINDER_WRAPPER = "<system-reminder>\n{text}\n</system-reminder>"
IMAGES_DROPPED = (
    "<system-reminder>\n{n} earlier image(s) attached to this conversation were omitted to fit "
    "the model's per-request image limit.\n</system-reminder>"
)
IMAGE_LABEL = "[attached image — file_id: {id}]"
IMAGE_NOT_SUPPORTED = (
    "[attached image — file_id: {id} — not shown: the current model does not support image input]"
)
FORMATTING_REENABLED = "Formatting re-enabled. "
# exact (reference §9.5)
CONTEXT_CUTOFF = (
    "<context_cutoff> Stop summarizing the rest of the conversation past this point. "
    "</context_cutoff>"
)
# exact (reference §6.9)
TOOL_FAILURE = (
    "LLM attempted to call a tool but failed. Most likely the tool name or arguments were "
    "misspelled."
)

# Onyx's intent, our words.
FILE_TEMPLATE = "File: {name}\n{content}\nEnd of File"


def file_block(name: str, content: str) -> str:
    """An uploaded file's text as the model receives it (``FILE_TEMPLATE``): the text the
    pipeline counts for the file, and the one a counting child counts for it
    (``server.precount``)."""
    return FILE_TEMPLATE.format(name=name, content=content)


FILE_METADATA_ONLY = (
    "File: {name} (id={id})\nUse the file_reader or python tools to access this file's contents."
)
FILE_PROCESSING = (
    "File: {name}\nThis file is still being processed, so its text is not available yet. Do "
    "not guess its contents: tell the user it is still processing and to ask again shortly."
    "\nEnd of File"
)
ADDITIONAL_CONTEXT = "Additional context that may be relevant to the user's question:\n\n{text}"
FILE_NO_TEXT = (
    "File: {name}\nNo machine-readable text could be extracted from this file.\nEnd of File"
)
REMINDER_TAG_DESCRIPTION = (
    "# System Reminders\n"
    "Some user messages are wrapped in <system-reminder> tags. They are added by the system, "
    "not written by the user: follow them, and do not mention them to the user."
)
DATETIME_APPEND = "\n\nAdditional Information:\n\t- The current date is {datetime}."
CITATION_GUIDANCE = (
    "\n\nCite the documents you use inline as [1], [2], … by their "
    '"document" number. Cite only documents that support the statement; never invent a '
    "citation."
)
IMAGE_REMINDER = (
    "Very briefly describe the image(s) generated. Do not include any links or attachments."
)
OPEN_URL_REMINDER = (
    "Before answering, use the open_url tool to read the most promising web_search results "
    "in full; the search snippets alone are not enough."
)
LAST_CYCLE_REMINDER = (
    "You are on your last cycle and no tools are available any more. Answer the user now with "
    "what you have."
)
FILE_LINK_REMINDER = (
    "Your code produced file(s) with download links. When you mention or share one, link it "
    "as [filename](file_link) with the exact file_link from the execution result."
)
CITATION_REMINDER = (
    'Remember to cite the documents you use inline as [1], [2], … by their "document" number.'
)
SUMMARIZATION_PROMPT = (
    "You are summarizing a conversation between a user and an AI assistant so that it can go on "
    "within a limited context window. Summarize only the messages before the <context_cutoff> "
    "marker; the messages after it are there for context and must not be summarized. Never "
    "mention the cutoff or that this is a summary. Write one dense paragraph that keeps: the "
    "user's goals and constraints, decisions made, facts and figures established, files and "
    "tools used and what they returned, open questions, and what was about to happen next."
)
EXISTING_SUMMARY = (
    "\n\n# Existing summary\nThere is a previous summary of the conversation. Build on top of "
    "this summary rather than repeating it:\n{summary}"
)
SUMMARY_REMINDER_FIRST = (
    "Help summarize the conversation up to the cutoff point. Do not mention the cutoff. "
    "Be thorough."
)
SUMMARY_REMINDER_PROGRESSIVE = (
    "Update the existing summary by incorporating the new messages up to the cutoff point. "
    "Do not mention the cutoff. Be thorough."
)
