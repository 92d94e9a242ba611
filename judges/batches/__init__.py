"""Batch APIs for judges: OpenAI Files + Batch and Anthropic Message Batches, at half price.

A :class:`~juryflow.judges.batches.base.BatchClient` submits a judge's requests as one or
more batches (split at the providers' limits), reports each batch the moment it exists
(``on_created``, for the run's journal), polls it, cancels it and reads its results back
as the same :class:`~juryflow.judges.providers.base.ModelResponse` a real-time call gives,
or a failure with the provider's reason. :func:`~juryflow.judges.batches.waiting.wait_for`
polls with backoff; :func:`~juryflow.judges.batches.factory.batch_client` picks the client.
"""
