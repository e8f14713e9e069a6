"""Face embeddings learned from every pairing in the batch; a pair's score is their cosine.

The tower is face_siamese's, on 96x96 photos. Each photo becomes a unit vector; a pair's
logit is a learned scale times the cosine of its two vectors, plus a learned bias.

Training sees a batch of B pairs (a_i, b_i), most of them the same person. Rather
than classify only those B pairs, every a_i is compared with every b_j: for each
same-person pair, a softmax over the batch must pick its partner out of the B - 1
other photos (InfoNCE, both ways, on cosines times 30), so each step has about B times
more negatives.
The scale and bias are fitted beside it by a balanced logistic loss on the detached
cosines, so probability 0.5 means as likely the same person as not.
Evaluation and serving average the embeddings of a photo, a zoom on its centre, and the
mirror images of both.
"""
import tensorflow as tf

from models import face_siamese, heads, precision, registry
from models.training import label_smoothing, softmax_losses

# 96x96 rather than face_siamese's 64x64, with cosines times 30 rather than 10: AUC 0.955 on
# average over three runs against 0.943 on new people (docs/recipes.md, rows 2b, 13, 15-15b);
# the recipe adds a fifth tower block with --model_params (0.958, rows 18-18b).
IMAGE_SHAPE = (96, 96, 1)
DEFAULT_PARAMS = {
    **face_siamese.DEFAULT_PARAMS,  # the tower's and the optimizer's
    'similarity_scale': 30.0,  # softmax temperature 0.033 on cosines
    # True: each photo's softmax also holds the other photos on its own side of the batch
    # (a_i against every a_j as well as every b_j: SimCLR's 2B - 2 negatives), for two more
    # B x B matmuls a step, nothing beside the tower's convolutions.
    'same_side_negatives': False,
    'flip_average': True,  # evaluation and serving: also embed each view's mirror image
    'zoom_views': (1.2,),  # evaluation and serving: also embed the central 1/1.2 of the photo
}


def batch_contrastive_loss(cosines, labels, scale, smoothing=0.0, own_side_cosines=None):
    """InfoNCE over the batch, both ways: each same-person pair against the other B - 1 photos
    of the other side (and, given own_side_cosines, the B - 1 others of its own side too).

    cosines: [B, B], a_i against b_j; own_side_cosines: ([B, B] a_i against a_j, b_i against
    b_j) or None. Rows of different-person pairs (label 0) are not anchors; their photos stay
    negatives.
    """
    logits = scale * cosines
    a_to_b, b_to_a = logits, tf.transpose(logits)
    count = tf.shape(logits)[0]
    if own_side_cosines is not None:
        others = tf.logical_not(tf.eye(count, dtype=tf.bool))

        def without_itself(own):  # [B, B - 1]: each photo against the others of its side
            return scale * tf.reshape(tf.boolean_mask(own, others), [count, count - 1])

        a_to_a, b_to_b = own_side_cosines
        a_to_b = tf.concat([a_to_b, without_itself(a_to_a)], axis=1)
        b_to_a = tf.concat([b_to_a, without_itself(b_to_b)], axis=1)
    targets = tf.range(count)
    weights = labels / tf.maximum(tf.reduce_sum(labels), 1.0)
    losses = (softmax_losses(targets, a_to_b, smoothing)
              + softmax_losses(targets, b_to_a, smoothing)) / 2
    return tf.reduce_sum(weights * losses)


def balanced_calibration_loss(cosines, labels, calibrate):
    """Logistic loss of calibrate(cosine) over all B x B pairings, same and different weighted
    equally; the cosines are detached, so only the scale and bias learn from it."""
    same = tf.linalg.diag(labels)  # the diagonal pairs that are the same person
    logits = calibrate(tf.stop_gradient(cosines))
    per_pair = tf.nn.sigmoid_cross_entropy_with_logits(same, logits)
    num_same = tf.maximum(tf.reduce_sum(same), 1.0)
    num_different = tf.cast(tf.size(same), tf.float32) - tf.reduce_sum(same)
    return (tf.reduce_sum(per_pair * same) / num_same
            + tf.reduce_sum(per_pair * (1 - same)) / num_different) / 2


def zoom_on_centre(images, zoom):
    """The central 1/zoom of each image [N, H, W, C], resized back to H x W."""
    margin = (1.0 - 1.0 / zoom) / 2
    count = tf.shape(images)[0]
    boxes = tf.tile([[margin, margin, 1 - margin, 1 - margin]], [count, 1])
    return tf.image.crop_and_resize(images, boxes, tf.range(count), images.shape[1:3])


def model_fn(features, labels, mode, params):
    training = mode == tf.estimator.ModeKeys.TRAIN
    face_siamese.check_image_side(features['image_a'], len(params['tower_filters']))
    tower = face_siamese.build_tower(params)

    def embed(images):
        if training:
            return tf.math.l2_normalize(precision.float32(tower(images, training=True)), axis=1)
        views = [images] + [zoom_on_centre(images, zoom) for zoom in params['zoom_views']]
        if params['flip_average']:
            views += [tf.image.flip_left_right(view) for view in views]
        vectors = tower(tf.concat(views, axis=0), training=False)
        vectors = tf.reduce_sum(tf.split(precision.float32(vectors), len(views)), axis=0)
        return tf.math.l2_normalize(vectors, axis=1)

    embedding_a = tf.identity(embed(features['image_a']), name='embedding_a')
    embedding_b = tf.identity(embed(features['image_b']), name='embedding_b')
    log_scale = tf.compat.v1.get_variable('score_log_scale', [],
                                          initializer=tf.constant_initializer(2.3))
    bias = tf.compat.v1.get_variable('score_bias', [], initializer=tf.constant_initializer(-5.0))

    def calibrate(cosines):
        return tf.exp(log_scale) * cosines + bias

    logits = calibrate(tf.reduce_sum(embedding_a * embedding_b, axis=1))
    train_loss = None
    if training:
        labels = tf.cast(tf.reshape(labels, [-1]), tf.float32)
        cosines = tf.matmul(embedding_a, embedding_b, transpose_b=True)
        own_sides = None
        if params['same_side_negatives']:
            own_sides = tuple(tf.matmul(side, side, transpose_b=True)
                              for side in (embedding_a, embedding_b))
        train_loss = tf.identity(
            batch_contrastive_loss(cosines, labels, params['similarity_scale'],
                                   label_smoothing(params, mode), own_sides)
            + balanced_calibration_loss(cosines, labels, calibrate), name='batch_loss')
    return heads.embedding_pair_spec(logits, labels, mode, params, features, embedding_a,
                                           embedding_b, update_ops=tower.updates,
                                           train_loss=train_loss)


SPEC = registry.register(registry.ModelSpec(
    name='face_embedding', model_fn=model_fn, default_params=DEFAULT_PARAMS,
    input_kind='face_pairs', image_shape=IMAGE_SHAPE))
