"""Default prompt texts of the built-in components (each overridable in node config)."""

# Small instruction-tuned models answer whatever question ends the user turn, so the expansion task
# comes after the question (measured with SmolLM2-135M: asked first, it answered the question).
EXPANSION_SYSTEM = "You write web search queries. You never answer questions."
EXPANSION = (
    "Write {n} short web search queries that would find the answer to this question. "
    "Reply only with a numbered list of {n} queries."
)
QA = "Answer the question with facts from the context above, not from memory."
REFINE = (
    "Refine the existing answer to the question using the new context. "
    "Keep what is correct, fix what the context contradicts, and stay concise."
)
TREE_MERGE = "Combine the candidate answers into one concise, correct answer to the question."
JUDGE = (
    "Answer the question briefly. Then, on a new line, write SEARCH: YES if answering well needs "
    "up-to-date or specific facts you are unsure of, otherwise SEARCH: NO."
)
SEARCH_ANSWER = "Answer the question using the search results. Be concise and cite facts from the results."
TOOL_PLAN = (
    "You can call these tools: {tools}. Write the tool calls needed to answer the question, "
    'one JSON object per line, like {{"tool": "calculator", "args": {{"expression": "2*3"}}}}. '
    "Write nothing else."
)
TOOL_ANSWER = "Answer the question using the tool results."

# Synthesis prompts are one user turn: the context between rule lines, then the instruction, the
# question and an "Answer:" cue, where a small model looks for what to answer. Chosen by measurement
# with SmolLM2-135M on the chunks the two RAG pipelines retrieve for 100 NarrativeQA questions
# (`python -m bench prompts --contexts ...`; bench/results/rag/prompts_retrieved.md:
# teola's chunks, prompts_li_adv2.md: LlamaIndex's): the gold answer is in 22 and 23 of 100 replies at 34 and
# 32 decode tokens, vs 16 and 15 at 23 and 25 tokens for the earlier layout (instruction as the system
# turn, labelled context, "Answer in one short sentence"); LlamaIndex's chat QA messages: 26 of 100
# at 40 tokens. The same instruction in a system turn: 20; asking for one sentence or a short phrase
# answers shorter (23-26 tokens) with fewer gold answers (16-18; prompts_teola_adv_b.md).
# Held out (100 other questions, prompts_seed1.md): 16/100, F1 0.132 vs 15/100, F1 0.120 before.
CONTEXT_LABEL = "Context:\n----------"
CONTEXT_END = "----------"
EXISTING_LABEL = "Existing answer:"
QUESTION_LABEL = "Question:"
ASK = "Answer:"


def qa_parts(question, context, instruction=QA, existing=None, ask=ASK):
    """The prompt parts of one synthesis call, in order: the fenced context (and an existing answer
    to refine), the instruction, the question, then `ask` (None or "" leaves it out). Parts are
    texts or Refs; none is a system turn."""
    parts = [("context_label", CONTEXT_LABEL), ("context", context), ("context_end", CONTEXT_END)]
    if existing is not None:
        parts += [("existing_label", EXISTING_LABEL), ("existing_answer", existing)]
    parts += [("task", instruction), ("question_label", QUESTION_LABEL), ("question", question)]
    if ask:
        parts.append(("ask", ask))
    return parts
