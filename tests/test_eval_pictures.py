"""Evaluation pictures: what the streaming metrics keep over batches, and what the drawings show."""
import numpy as np
import pytest
import tensorflow as tf

from models import drawing, eval_pictures


def run_batches(make_metric, batches):
    """Runs a (value, update_op) metric over the batches in one graph; returns the final value."""
    with tf.Graph().as_default():
        placeholders = [tf.compat.v1.placeholder(np.asarray(b).dtype, [None] + list(np.shape(b)[1:]))
                        for b in batches[0]]
        value, update = make_metric(*placeholders)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.local_variables_initializer())
            for batch in batches:
                session.run(update, dict(zip(placeholders, batch)))
            return session.run(value)


def test_streaming_top_k_keeps_the_highest_scores_over_all_batches():
    def metric(scores, ids):
        kept, update = eval_pictures.streaming_top_k(scores, {'id': ids}, 3, 'top')
        return kept, update
    kept = run_batches(metric, [
        (np.array([0.5, -np.inf, 0.9], np.float32), np.array([1, 2, 3])),
        (np.array([0.7, 0.1], np.float32), np.array([4, 5])),
        (np.array([0.95], np.float32), np.array([6])),
    ])
    assert kept['id'].tolist() == [6, 3, 4]
    np.testing.assert_allclose(kept['score'], [0.95, 0.9, 0.7])


def test_fewer_mistakes_than_slots_leave_empty_slots_out_of_the_grid():
    images = np.zeros([4, 28, 28, 1], np.float32)
    labels = np.array([1, 2, 3, 4])
    classes = np.array([1, 7, 3, 4])  # one mistake: true 2, predicted 7
    probabilities = np.full([4, 10], 0.02, np.float32)
    probabilities[1, 7] = 0.82

    def metric(images, labels, classes, probabilities):
        return eval_pictures.most_confident_mistakes(images, labels, classes, probabilities)
    summary = tf.compat.v1.Summary.FromString(
        run_batches(metric, [(images, labels, classes, probabilities)]))
    png = summary.value[0].tensor.string_val[2]
    picture = tf.io.decode_png(png).numpy()
    expected = drawing.mistake_grid(images[1:2], [2], [7], [0.82])
    np.testing.assert_array_equal(picture, expected)  # one tile: 'T2>P7' and '82%'


def test_confusion_matrix_counts_every_batch():
    def metric(labels, classes):
        counts_summary, update = eval_pictures.confusion_matrix(labels, classes, 3)
        return counts_summary, update
    summary = tf.compat.v1.Summary.FromString(run_batches(metric, [
        (np.array([0, 1, 2]), np.array([0, 2, 2])), (np.array([1]), np.array([2]))]))
    picture = tf.io.decode_png(summary.value[0].tensor.string_val[2]).numpy()
    np.testing.assert_array_equal(picture, drawing.confusion_image(
        np.array([[1, 0, 0], [0, 0, 2], [0, 0, 1]])))


def test_accuracy_of_each_class_is_over_its_own_examples_and_every_batch():
    """fox: one example, wrong; owl: no example, so no accuracy (NaN), not 0."""
    def metric(labels, classes):
        metrics = eval_pictures.accuracy_of_each_class(labels, classes,
                                                       ['cat', 'dog', 'fox', 'owl'])
        return ({name: value for name, (value, _) in metrics.items()},
                tf.group(*[update for _, update in metrics.values()]))
    accuracies = run_batches(metric, [(np.array([0, 0, 1]), np.array([0, 1, 1])),
                                      (np.array([2, 0]), np.array([1, 0]))])
    assert accuracies == pytest.approx({'accuracy_of_class/cat': 2 / 3, 'accuracy_of_class/dog': 1.0,
                                        'accuracy_of_class/fox': 0.0,
                                        'accuracy_of_class/owl': np.nan}, nan_ok=True)


def test_drawn_text_is_the_glyphs():
    canvas = np.zeros([5, 7, 3], np.uint8)
    drawing.draw_text(canvas, '17', 0, 0, drawing.WHITE, zoom=1)
    ink = canvas[..., 0] > 0
    expected = [[c == '#' for c in a + '.' + b] for a, b in zip(drawing.GLYPHS['1'],
                                                                  drawing.GLYPHS['7'])]
    np.testing.assert_array_equal(ink, expected)


def test_confusion_image_shades_by_share_of_the_row():
    picture = drawing.confusion_image(np.array([[9, 1], [0, 10]]), cell=28)
    cell = lambda i, j: picture[36 + 28 * i + 2, 36 + 28 * j + 2]  # noqa: E731  (past the grid line)
    assert cell(1, 1)[0] < cell(0, 0)[0] < cell(0, 1)[0] < cell(1, 0)[0] == 255


def test_pair_strip_marks_scores_on_the_wrong_side_red():
    faces = np.random.RandomState(0).rand(2, 8, 8, 1).astype(np.float32)
    strip = drawing.pair_strip(faces, faces, labels=[1, 0], scores=[0.3, 0.2])
    reds = np.all(strip == drawing.RED, axis=-1)
    greens = np.all(strip == drawing.GREEN, axis=-1)
    half = strip.shape[1] // 2
    assert reds[:, :half].any() and not greens[:, :half].any()  # same person, scored 0.3
    assert greens[:, half:].any() and not reds[:, half:].any()  # different people, scored 0.2
